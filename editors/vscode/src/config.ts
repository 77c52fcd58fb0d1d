/** Settings → how to launch `talaria lsp`. Pure: no `vscode` import. */

export const MODES = ['default', 'accept_edits', 'plan'] as const;
export type Mode = (typeof MODES)[number];

export interface Settings {
  /** The talaria executable (`talaria.path`). */
  path: string;
  /** Extra arguments after `lsp` (`talaria.extraArgs`). */
  extraArgs: string[];
  /** Model name, empty for Talaria's configured default (`talaria.model`). */
  model: string;
  /** Permission mode (`talaria.mode`). */
  mode: Mode;
}

export interface InitializationOptions {
  mode: Mode;
  model?: string;
}

export interface Launch {
  command: string;
  args: string[];
  /** Added to the inherited environment. */
  env: Record<string, string>;
  initializationOptions: InitializationOptions;
}

/** Read and clean the `talaria.*` settings; `get` takes the key without the `talaria.` prefix. */
export function settingsFrom(get: (key: string) => unknown): Settings {
  const path = get('path');
  const extraArgs = get('extraArgs');
  const model = get('model');
  const mode = get('mode');
  return {
    path: typeof path === 'string' && path.trim() !== '' ? path.trim() : 'talaria',
    extraArgs: Array.isArray(extraArgs)
      ? extraArgs.filter((a): a is string => typeof a === 'string')
      : [],
    model: typeof model === 'string' ? model.trim() : '',
    mode: MODES.find((m) => m === mode) ?? 'default',
  };
}

export function launchFor(s: Settings): Launch {
  const env: Record<string, string> = {};
  const initializationOptions: InitializationOptions = { mode: s.mode };
  if (s.model !== '') {
    env.TALARIA_MODEL = s.model;
    initializationOptions.model = s.model;
  }
  return { command: s.path, args: ['lsp', ...s.extraArgs], env, initializationOptions };
}
