import assert from 'node:assert/strict';
import { test } from 'node:test';
import { launchFor, settingsFrom } from '../config';

function from(values: Record<string, unknown>) {
  return settingsFrom((key) => values[key]);
}

test('defaults: `talaria lsp`, mode default, no model', () => {
  assert.deepEqual(launchFor(from({})), {
    command: 'talaria',
    args: ['lsp'],
    env: {},
    initializationOptions: { mode: 'default' },
  });
});

test('model goes to TALARIA_MODEL and initializationOptions; extra args follow `lsp`', () => {
  const launch = launchFor(
    from({ path: '/opt/bin/talaria', extraArgs: ['--verbose'], model: 'gpt-x', mode: 'plan' }),
  );
  assert.deepEqual(launch, {
    command: '/opt/bin/talaria',
    args: ['lsp', '--verbose'],
    env: { TALARIA_MODEL: 'gpt-x' },
    initializationOptions: { mode: 'plan', model: 'gpt-x' },
  });
});

test('bad values fall back to defaults', () => {
  assert.deepEqual(from({ path: '  ', extraArgs: ['a', 3, null], model: 7, mode: 'yolo' }), {
    path: 'talaria',
    extraArgs: ['a'],
    model: '',
    mode: 'default',
  });
});
