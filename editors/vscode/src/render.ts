/**
 * `talaria/update` notifications → text for the "Talaria" output channel.
 * Pure: no `vscode` import. Params are checked here, since they come off the wire.
 *
 * `params.update` is an ACP `session/update` update: `agent_message_chunk`,
 * `agent_thought_chunk`, `tool_call`, `tool_call_update` and `plan` are shown; any other kind,
 * or a malformed update, renders as "".
 */

/** Lines of a tool's text output shown before "… (N more lines)". */
export const MAX_TOOL_LINES = 12;

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(o: Json, key: string): string | undefined {
  const v = o[key];
  return typeof v === 'string' ? v : undefined;
}

/** Text of an ACP content block, or undefined for images, resources and the like. */
function blockText(block: unknown): string | undefined {
  return isObject(block) && block.type === 'text' ? str(block, 'text') : undefined;
}

const SHOWN = new Set<unknown>([
  'agent_message_chunk',
  'agent_thought_chunk',
  'tool_call',
  'tool_call_update',
  'plan',
]);

const PLAN_MARKS: Record<string, string> = { completed: '[x]', in_progress: '[>]', pending: '[ ]' };

export class TranscriptRenderer {
  private readonly titles = new Map<string, string>();
  private session: string | undefined;
  private stream: 'message' | 'thought' | undefined;
  private atLineStart = true;

  /** Render one `talaria/update` params object; "" when there is nothing to show. */
  render(params: unknown): string {
    if (!isObject(params) || !isObject(params.update) || !SHOWN.has(params.update.sessionUpdate)) {
      return '';
    }
    let head = '';
    const sessionId = str(params, 'sessionId');
    if (sessionId !== undefined && sessionId !== this.session) {
      this.session = sessionId;
      this.stream = undefined;
      head = this.line(`── session ${sessionId} ──`);
    }
    return head + this.renderUpdate(params.update);
  }

  /** A banner for a command the user just ran, e.g. "» Ask: why is this slow?". */
  begin(title: string): string {
    this.stream = undefined;
    return this.line(`» ${title}`);
  }

  /** A line of our own, e.g. an error. */
  note(text: string): string {
    this.stream = undefined;
    return this.line(text);
  }

  private renderUpdate(u: Json): string {
    switch (u.sessionUpdate) {
      case 'agent_message_chunk':
        return this.chunk('message', blockText(u.content));
      case 'agent_thought_chunk':
        return this.chunk('thought', blockText(u.content));
      case 'tool_call':
        return this.toolCall(u, true);
      case 'tool_call_update':
        return this.toolCall(u, false);
      case 'plan':
        return this.plan(u.entries);
      default:
        return '';
    }
  }

  private chunk(kind: 'message' | 'thought', text: string | undefined): string {
    if (text === undefined || text === '') {
      return '';
    }
    let out = '';
    if (this.stream !== kind) {
      out += this.atLineStart ? '' : '\n';
      out += kind === 'thought' ? '(thinking) ' : '';
      this.stream = kind;
    }
    out += text;
    this.atLineStart = out.endsWith('\n');
    return out;
  }

  private toolCall(u: Json, isNew: boolean): string {
    const id = str(u, 'toolCallId');
    if (id === undefined) {
      return '';
    }
    const title = str(u, 'title');
    if (title !== undefined) {
      this.titles.set(id, title);
    }
    const status = str(u, 'status');
    const content = this.toolContent(u.content);
    if (!isNew && status === undefined && title === undefined && content === '') {
      return '';
    }
    this.stream = undefined;
    const name = this.titles.get(id) ?? id;
    return this.line(status === undefined ? `▸ ${name}` : `▸ ${name} … ${status}`) + content;
  }

  private toolContent(content: unknown): string {
    if (!Array.isArray(content)) {
      return '';
    }
    const lines: string[] = [];
    for (const item of content) {
      if (!isObject(item)) {
        continue;
      }
      if (item.type === 'diff' && typeof item.path === 'string') {
        lines.push(`✎ ${item.path}`);
      } else if (item.type === 'content') {
        const text = blockText(item.content);
        if (text !== undefined && text.trim() !== '') {
          lines.push(...text.replace(/\n$/, '').split('\n'));
        }
      }
    }
    if (lines.length > MAX_TOOL_LINES) {
      const more = lines.length - MAX_TOOL_LINES;
      lines.splice(MAX_TOOL_LINES, more, `… (${more} more lines)`);
    }
    return lines.map((l) => `    ${l}\n`).join('');
  }

  private plan(entries: unknown): string {
    if (!Array.isArray(entries)) {
      return '';
    }
    const lines = entries.filter(isObject).map((e) => {
      const mark = PLAN_MARKS[str(e, 'status') ?? ''] ?? '[ ]';
      const high = e.priority === 'high' ? ' (high)' : '';
      return `  ${mark} ${str(e, 'content') ?? ''}${high}\n`;
    });
    this.stream = undefined;
    return this.line('Plan:') + lines.join('');
  }

  /** `text` on a line of its own. */
  private line(text: string): string {
    const out = (this.atLineStart ? '' : '\n') + text + '\n';
    this.atLineStart = true;
    return out;
  }
}
