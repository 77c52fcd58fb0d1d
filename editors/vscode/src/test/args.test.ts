import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  askArgs,
  describeTarget,
  explainArgs,
  fixArgs,
  toLspRange,
  type EditorState,
  type Range,
} from '../args';

const URI = 'file:///work/app.py';

function range(l1: number, c1: number, l2: number, c2: number): Range {
  return { start: { line: l1, character: c1 }, end: { line: l2, character: c2 } };
}

function editor(selection: Range, lineLength = 20): EditorState {
  return { uri: URI, selection, lineLength };
}

/** Like vscode.Position: values behind getters on a class instance. */
class ClassPosition {
  constructor(
    private readonly l: number,
    private readonly c: number,
  ) {}
  get line(): number {
    return this.l;
  }
  get character(): number {
    return this.c;
  }
}

test('ask without a selection sends only the prompt', () => {
  assert.deepEqual(askArgs('why?', editor(range(3, 4, 3, 4))), ['why?']);
  assert.deepEqual(askArgs('why?'), ['why?']);
});

test('ask with a selection sends the prompt and {uri, range}', () => {
  assert.deepEqual(askArgs('why?', editor(range(1, 2, 5, 0))), [
    'why?',
    { uri: URI, range: range(1, 2, 5, 0) },
  ]);
});

test('fix and explain use the selection', () => {
  const e = editor(range(2, 0, 4, 7));
  assert.deepEqual(fixArgs(e), [{ uri: URI, range: range(2, 0, 4, 7) }]);
  assert.deepEqual(explainArgs(e), [{ uri: URI, range: range(2, 0, 4, 7) }]);
});

test('fix and explain without a selection cover the cursor line', () => {
  const e = editor(range(6, 3, 6, 3), 42);
  assert.deepEqual(fixArgs(e), [{ uri: URI, range: range(6, 0, 6, 42) }]);
  assert.deepEqual(explainArgs(e), [{ uri: URI, range: range(6, 0, 6, 42) }]);
});

test('LSP ranges keep the 0-based numbers and order start before end', () => {
  assert.deepEqual(toLspRange(range(0, 0, 0, 5)), range(0, 0, 0, 5));
  // A selection made bottom-up (anchor after the cursor).
  assert.deepEqual(toLspRange(range(9, 1, 2, 8)), range(2, 8, 9, 1));
  assert.deepEqual(toLspRange(range(4, 9, 4, 2)), range(4, 2, 4, 9));
});

test('LSP ranges are plain JSON even from class positions', () => {
  const sel = { start: new ClassPosition(1, 2), end: new ClassPosition(3, 4) };
  const [, target] = askArgs('q', editor(sel));
  assert.equal(
    JSON.stringify(target),
    `{"uri":"${URI}","range":{"start":{"line":1,"character":2},"end":{"line":3,"character":4}}}`,
  );
});

test('describeTarget shows 1-based lines', () => {
  assert.equal(describeTarget('app.py', range(0, 0, 0, 3)), 'app.py:1');
  assert.equal(describeTarget('app.py', range(2, 0, 4, 1)), 'app.py:3-5');
  // Ending at column 0 does not take in that line.
  assert.equal(describeTarget('app.py', range(2, 0, 4, 0)), 'app.py:3-4');
});
