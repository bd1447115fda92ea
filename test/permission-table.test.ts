// The protocol's allow-lists (permissionsFor, what `polish nats-config` and the embedded server
// configure) held to the permission table cell by cell, in process: every principal × every
// subject of the table, each failure naming the principal, the operation and the subject.
// permissions.test.ts proves the same table on a real nats-server.
import { describe, expect, it } from 'vitest';
import { PRINCIPALS as PROTOCOL_PRINCIPALS, permissionsFor } from '@polish/protocol';
import { PRINCIPALS, PUBLISH, SUBSCRIBE, type Principal } from './support/permission-table.js';

/**
 * Whether an allow-list entry covers every subject `subject` stands for, as nats-server decides
 * it: `*` is one token, `>` one or more trailing tokens; a wildcard subscription is allowed only
 * by an entry at least as wide.
 */
function covers(entry: string, subject: string): boolean {
  const allowed = entry.split('.');
  const asked = subject.split('.');
  for (let index = 0; index < allowed.length; index += 1) {
    const token = allowed[index];
    if (token === '>') return asked.length > index;
    if (index >= asked.length) return false;
    if (token === '*' ? asked[index] === '>' : token !== asked[index]) return false;
  }
  return allowed.length === asked.length;
}

const may = (list: string[], subject: string) => list.some((entry) => covers(entry, subject));

describe('the permission table', () => {
  it('names every principal the protocol defines, and no other', () => {
    expect([...PRINCIPALS].sort()).toEqual([...PROTOCOL_PRINCIPALS].sort());
  });

  it.each([
    ['a.b', 'a.b', true],
    ['a.b', 'a.c', false],
    ['a.*', 'a.b', true],
    ['a.*', 'a.b.c', false],
    ['a.*', 'a.>', false],
    ['a.*', 'a.*', true],
    ['a.>', 'a', false],
    ['a.>', 'a.b.c', true],
    ['a.>', 'a.>', true],
    ['a.b.c', 'a.b', false],
    ['a.b', 'a.b.c', false],
    ['a.*.c', 'a.b.c', true],
    ['a.*.c', 'a.b.d', false],
  ])('matches subjects as nats-server does: %s covers %s is %s', (entry, subject, expected) => {
    expect(covers(entry, subject)).toBe(expected);
  });
});

describe.each(PRINCIPALS)("the protocol's allow-lists for %s", (principal: Principal) => {
  const permissions = permissionsFor(principal);
  /** Every cell of the table where the allow-list disagrees, named. */
  const wrong = (operation: 'publish' | 'subscribe', table: typeof PUBLISH, list: string[]) =>
    table.flatMap(([subject, allowed]) => {
      const expected = allowed.includes(principal);
      return may(list, subject) === expected ? [] : [`${expected ? 'refuses' : 'allows'} ${operation} to ${subject}`];
    });

  it('publishes exactly where the table allows', () => {
    const cells = wrong('publish', PUBLISH, permissions.publish);
    expect(cells, `${principal} ${cells.join('; ')}`).toEqual([]);
  });

  it('subscribes exactly where the table allows', () => {
    const cells = wrong('subscribe', SUBSCRIBE, permissions.subscribe);
    expect(cells, `${principal} ${cells.join('; ')}`).toEqual([]);
  });

  it('answers requests only as the orchestrator (the run service)', () => {
    expect(permissions.allowResponses).toBe(principal === 'orchestrator');
  });
});
