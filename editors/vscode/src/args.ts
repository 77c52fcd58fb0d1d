/**
 * Arguments for the server's `workspace/executeCommand` commands, built from editor state.
 * Pure: no `vscode` import, so it runs under plain Node in the unit tests.
 */

/** A position as LSP and VS Code both count it: 0-based line, 0-based UTF-16 character. */
export interface Position {
  readonly line: number;
  readonly character: number;
}

export interface Range {
  readonly start: Position;
  readonly end: Position;
}

/** What `talaria.fix`, `talaria.explain` and (optionally) `talaria.ask` take. */
export interface Target {
  uri: string;
  range: Range;
}

/** What the extension reads off the active editor. */
export interface EditorState {
  /** The document URI as the language client sends it (`code2ProtocolConverter.asUri`). */
  uri: string;
  /** The selection, start and end in either order (VS Code `Selection` works as is). */
  selection: Range;
  /** Length of the line the selection starts on: an empty selection means "this line". */
  lineLength: number;
}

function before(a: Position, b: Position): boolean {
  return a.line < b.line || (a.line === b.line && a.character < b.character);
}

/**
 * A plain-JSON LSP range, start before end. Same 0-based numbers: VS Code and LSP agree, so
 * nothing is shifted; copying matters because VS Code positions are class instances.
 */
export function toLspRange(r: Range): Range {
  const [start, end] = before(r.end, r.start) ? [r.end, r.start] : [r.start, r.end];
  return {
    start: { line: start.line, character: start.character },
    end: { line: end.line, character: end.character },
  };
}

export function isEmpty(r: Range): boolean {
  return r.start.line === r.end.line && r.start.character === r.end.character;
}

/** The selection, or the whole line under the cursor when nothing is selected. */
export function targetOf(editor: EditorState): Target {
  if (!isEmpty(editor.selection)) {
    return { uri: editor.uri, range: toLspRange(editor.selection) };
  }
  const line = Math.min(editor.selection.start.line, editor.selection.end.line);
  return {
    uri: editor.uri,
    range: { start: { line, character: 0 }, end: { line, character: editor.lineLength } },
  };
}

/** `[prompt]`, or `[prompt, {uri, range}]` when text is selected. */
export function askArgs(prompt: string, editor?: EditorState): [string] | [string, Target] {
  if (editor === undefined || isEmpty(editor.selection)) {
    return [prompt];
  }
  return [prompt, targetOf(editor)];
}

export function fixArgs(editor: EditorState): [Target] {
  return [targetOf(editor)];
}

export function explainArgs(editor: EditorState): [Target] {
  return [targetOf(editor)];
}

/** `app.py:3` or `app.py:3-7`: 1-based lines, for people. */
export function describeTarget(path: string, range: Range): string {
  const r = toLspRange(range);
  const first = r.start.line + 1;
  // A selection ending at column 0 of a line does not include that line.
  const last = r.end.character === 0 && r.end.line > r.start.line ? r.end.line : r.end.line + 1;
  return first === last ? `${path}:${first}` : `${path}:${first}-${last}`;
}
