/**
 * The client of `talaria lsp`: starts the server, adds palette commands that call the server's
 * `talaria.*` commands, streams `talaria/update` into the "Talaria" output channel, and keeps a
 * status bar item. Code actions, edits (`workspace/applyEdit`), progress and
 * `window/showDocument` are handled by vscode-languageclient itself.
 */
import * as vscode from 'vscode';
import {
  ExecuteCommandRequest,
  LanguageClient,
  LSPErrorCodes,
  ResponseError,
  RevealOutputChannelOn,
  State,
} from 'vscode-languageclient/node';
import { askArgs, describeTarget, explainArgs, fixArgs, targetOf, type EditorState } from './args';
import { BusyTracker } from './busy';
import { launchFor, settingsFrom } from './config';
import { TranscriptRenderer } from './render';

/** Command ids the server registers for `workspace/executeCommand`. */
const SERVER = {
  ask: 'talaria.ask',
  fix: 'talaria.fix',
  explain: 'talaria.explain',
  cancel: 'talaria.cancel',
  newSession: 'talaria.newSession',
} as const;

let client: LanguageClient | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('Talaria');
  const item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 0);
  const renderer = new TranscriptRenderer();
  const busy = new BusyTracker();
  let state = State.Starting;
  let wasBusy = false;
  let idleTimer: NodeJS.Timeout | undefined;
  context.subscriptions.push(output, item, { dispose: () => clearTimeout(idleTimer) });

  function refresh(): void {
    const now = Date.now();
    const working = state === State.Running && busy.busy(now);
    if (state === State.Starting) {
      item.text = '$(sync~spin) Talaria: starting';
      item.tooltip = 'Starting the Talaria language server';
      item.command = 'talaria.client.showOutput';
    } else if (state === State.Stopped) {
      item.text = '$(error) Talaria: stopped';
      item.tooltip = 'The Talaria language server is not running. Click to restart.';
      item.command = 'talaria.client.restart';
    } else if (working) {
      item.text = '$(sync~spin) Talaria: working';
      item.tooltip = 'Click to cancel';
      item.command = 'talaria.client.cancel';
    } else {
      item.text = 'Talaria: idle';
      item.tooltip = 'Show the Talaria transcript';
      item.command = 'talaria.client.showOutput';
    }
    item.show();
    if (working && !wasBusy) {
      output.show(true);
    }
    wasBusy = working;
    clearTimeout(idleTimer);
    const wait = busy.idleIn(now);
    if (wait !== undefined) {
      idleTimer = setTimeout(refresh, wait);
    }
  }

  /** A failed server command, in the transcript and a notification; cancellation is not one. */
  function report(err: unknown): undefined {
    if (!(err instanceof ResponseError && err.code === LSPErrorCodes.RequestCancelled)) {
      const message = err instanceof Error ? err.message : String(err);
      output.append(renderer.note(`error: ${message}`));
      void vscode.window.showErrorMessage(`Talaria: ${message}`);
    }
    return undefined;
  }

  /** Run a server command with the status bar showing it. */
  async function tracked<T>(work: () => Thenable<T> | Promise<T>): Promise<T | undefined> {
    busy.begin();
    refresh();
    try {
      return await work();
    } catch (err) {
      return report(err);
    } finally {
      busy.end();
      refresh();
    }
  }

  async function run(command: string, args: unknown[], banner?: string): Promise<void> {
    const c = client;
    if (c === undefined || !c.isRunning()) {
      void vscode.window.showErrorMessage('Talaria: the language server is not running.');
      return;
    }
    if (banner !== undefined) {
      output.append(renderer.begin(banner));
    }
    const send = () => c.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
    if (command === SERVER.cancel) {
      await send().catch(report);
    } else {
      await tracked(send);
    }
  }

  function activeEditor(): { editor: EditorState; path: string } | undefined {
    const editor = vscode.window.activeTextEditor;
    if (editor === undefined || client === undefined) {
      return undefined;
    }
    const { document, selection } = editor;
    return {
      editor: {
        uri: client.code2ProtocolConverter.asUri(document.uri),
        selection,
        lineLength: document.lineAt(selection.start.line).text.length,
      },
      path: vscode.workspace.asRelativePath(document.uri),
    };
  }

  function onTarget(verb: string, build: (e: EditorState) => unknown[], server: string) {
    return async (): Promise<void> => {
      const active = activeEditor();
      if (active === undefined) {
        void vscode.window.showWarningMessage(`Talaria: open a file to ${verb.toLowerCase()}.`);
        return;
      }
      const where = describeTarget(active.path, targetOf(active.editor).range);
      await run(server, build(active.editor), `${verb}: ${where}`);
    };
  }

  async function ask(): Promise<void> {
    const prompt = await vscode.window.showInputBox({
      title: 'Ask Talaria',
      prompt: 'The selection, if any, goes along with the question.',
      ignoreFocusOut: true,
    });
    if (prompt === undefined || prompt.trim() === '') {
      return;
    }
    await run(SERVER.ask, askArgs(prompt, activeEditor()?.editor), `Ask: ${prompt}`);
  }

  async function start(): Promise<void> {
    const settings = settingsFrom((key) => vscode.workspace.getConfiguration('talaria').get(key));
    const launch = launchFor(settings);
    const c = new LanguageClient(
      'talaria',
      'Talaria Language Server',
      {
        command: launch.command,
        args: launch.args,
        options: {
          // For a command, vscode-languageclient hands `env` to spawn as is: keep PATH, keys etc.
          env: { ...process.env, ...launch.env },
          cwd: vscode.workspace.workspaceFolders?.[0]?.uri.fsPath,
        },
      },
      {
        documentSelector: [{ scheme: 'file' }, { scheme: 'untitled' }],
        initializationOptions: launch.initializationOptions,
        revealOutputChannelOn: RevealOutputChannelOn.Never,
        middleware: {
          // Server commands run from code actions come through here.
          executeCommand: (command, args, next) =>
            command === SERVER.cancel ? next(command, args) : tracked(() => next(command, args)),
        },
      },
    );
    c.onDidChangeState((e) => {
      if (client === c) {
        state = e.newState;
        refresh();
      }
    });
    c.onNotification('talaria/update', (params: unknown) => {
      busy.activity(Date.now());
      refresh();
      const text = renderer.render(params);
      if (text !== '') {
        output.append(text);
      }
    });
    client = c;
    try {
      await c.start();
    } catch (err) {
      if (client === c) {
        state = State.Stopped;
        refresh();
      }
      const message = err instanceof Error ? err.message : String(err);
      const cmd = [launch.command, ...launch.args].join(' ');
      output.append(renderer.note(`could not start \`${cmd}\`: ${message}`));
      void vscode.window.showErrorMessage(
        `Talaria: could not start \`${cmd}\` (${message}). Check the talaria.path setting.`,
      );
    }
  }

  async function restart(): Promise<void> {
    const old = client;
    client = undefined;
    state = State.Starting;
    refresh();
    if (old !== undefined) {
      await old.dispose().catch(() => undefined);
    }
    await start();
  }

  const commands: Record<string, () => unknown> = {
    'talaria.client.ask': ask,
    'talaria.client.fix': onTarget('Fix', fixArgs, SERVER.fix),
    'talaria.client.explain': onTarget('Explain', explainArgs, SERVER.explain),
    'talaria.client.cancel': () => run(SERVER.cancel, []),
    'talaria.client.newSession': () => run(SERVER.newSession, [], 'New session'),
    'talaria.client.showOutput': () => output.show(),
    'talaria.client.restart': restart,
  };
  for (const [id, handler] of Object.entries(commands)) {
    context.subscriptions.push(vscode.commands.registerCommand(id, handler));
  }
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration(async (e) => {
      if (!e.affectsConfiguration('talaria')) {
        return;
      }
      const choice = await vscode.window.showInformationMessage(
        'Talaria settings changed. Restart the language server to apply them?',
        'Restart',
      );
      if (choice === 'Restart') {
        await restart();
      }
    }),
  );

  refresh();
  void start();
}

export async function deactivate(): Promise<void> {
  await client?.dispose();
  client = undefined;
}
