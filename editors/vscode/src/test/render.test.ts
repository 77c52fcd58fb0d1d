import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_TOOL_LINES, TranscriptRenderer } from '../render';

const S = 'sess-1';

function params(update: Record<string, unknown>, sessionId = S) {
  return { sessionId, update };
}

function text(kind: string, t: string) {
  return params({ sessionUpdate: kind, content: { type: 'text', text: t } });
}

/** A renderer that has already printed the session header. */
function started(): TranscriptRenderer {
  const r = new TranscriptRenderer();
  assert.equal(r.render(text('agent_message_chunk', '')), `── session ${S} ──\n`);
  return r;
}

test('message chunks stream as they come', () => {
  const r = started();
  assert.equal(r.render(text('agent_message_chunk', 'Hello')), 'Hello');
  assert.equal(r.render(text('agent_message_chunk', ', world')), ', world');
});

test('thought chunks are marked, and the message after them starts a new line', () => {
  const r = started();
  assert.equal(r.render(text('agent_thought_chunk', 'hmm')), '(thinking) hmm');
  assert.equal(r.render(text('agent_thought_chunk', '...')), '...');
  assert.equal(r.render(text('agent_message_chunk', 'Answer')), '\nAnswer');
});

test('tool calls are lines; updates reuse the title', () => {
  const r = started();
  r.render(text('agent_message_chunk', 'Let me look'));
  const call = { sessionUpdate: 'tool_call', toolCallId: 't1', title: 'Read src/app.py', kind: 'read', status: 'pending' };
  assert.equal(r.render(params(call)), '\n▸ Read src/app.py … pending\n');
  const done = { sessionUpdate: 'tool_call_update', toolCallId: 't1', status: 'completed' };
  assert.equal(r.render(params(done)), '▸ Read src/app.py … completed\n');
  // No status, title or content: nothing to say.
  assert.equal(r.render(params({ sessionUpdate: 'tool_call_update', toolCallId: 't1' })), '');
});

test('a tool call without status or known title', () => {
  const r = started();
  assert.equal(r.render(params({ sessionUpdate: 'tool_call', toolCallId: 't2', title: 'Run tests' })), '▸ Run tests\n');
  assert.equal(
    r.render(params({ sessionUpdate: 'tool_call_update', toolCallId: 'zz', status: 'failed' })),
    '▸ zz … failed\n',
  );
});

test('tool content: text indented and capped, diffs by path', () => {
  const r = started();
  const many = Array.from({ length: MAX_TOOL_LINES + 3 }, (_, i) => `line ${i}`).join('\n');
  const out = r.render(
    params({
      sessionUpdate: 'tool_call_update',
      toolCallId: 't3',
      status: 'completed',
      content: [
        { type: 'diff', path: '/w/app.py', oldText: 'a', newText: 'b' },
        { type: 'content', content: { type: 'text', text: many + '\n' } },
        { type: 'terminal', terminalId: 'term-1' },
      ],
    }),
  );
  const lines = out.split('\n');
  assert.equal(lines[0], '▸ t3 … completed');
  assert.equal(lines[1], '    ✎ /w/app.py');
  assert.equal(lines[2], '    line 0');
  assert.equal(lines[MAX_TOOL_LINES], `    line ${MAX_TOOL_LINES - 2}`);
  assert.equal(lines[MAX_TOOL_LINES + 1], '    … (4 more lines)');
  assert.equal(lines.length, MAX_TOOL_LINES + 3); // + header, + trailing ""
});

test('plans list their entries with status marks', () => {
  const r = started();
  r.render(text('agent_message_chunk', 'Plan first'));
  const out = r.render(
    params({
      sessionUpdate: 'plan',
      entries: [
        { content: 'Read the code', priority: 'medium', status: 'completed' },
        { content: 'Fix the bug', priority: 'high', status: 'in_progress' },
        { content: 'Run tests', priority: 'low', status: 'pending' },
      ],
    }),
  );
  assert.equal(out, '\nPlan:\n  [x] Read the code\n  [>] Fix the bug (high)\n  [ ] Run tests\n');
});

test('unknown kinds and malformed params render nothing', () => {
  const r = started();
  for (const p of [
    params({ sessionUpdate: 'available_commands_update', availableCommands: [] }),
    params({ sessionUpdate: 'current_mode_update', currentModeId: 'plan' }),
    params({ sessionUpdate: 'user_message_chunk', content: { type: 'text', text: 'hi' } }),
    params({ sessionUpdate: 'agent_message_chunk', content: { type: 'image', data: '' } }),
    params({ sessionUpdate: 'tool_call', title: 'no id' }),
    params({ sessionUpdate: 'plan', entries: 'nope' }),
    params({ sessionUpdate: 'brand_new_kind' }, 'other-session'),
    { sessionId: S },
    null,
    'text',
    42,
  ]) {
    assert.equal(r.render(p), '', JSON.stringify(p));
  }
});

test('a new session gets a header; banners and notes start their own line', () => {
  const r = started();
  assert.equal(r.render(text('agent_message_chunk', 'partial')), 'partial');
  assert.equal(r.begin('Ask: why?'), '\n» Ask: why?\n');
  assert.equal(r.render({ sessionId: 's2', update: { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'Hi' } } }), '── session s2 ──\nHi');
  assert.equal(r.note('error: boom'), '\nerror: boom\n');
});
