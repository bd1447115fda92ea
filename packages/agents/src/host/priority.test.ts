import { readFileSync } from 'node:fs';
import { setPriority } from 'node:os';
import { describe, expect, it } from 'vitest';
import { setThreadNice } from './priority.js';

describe('worker priority', () => {
  it('takes a thread that has exited as done, not as an error that would stop the host', () => {
    // No process has a pid above pid_max: the kernel answers ESRCH, as for a thread that exited
    // between the host listing a worker's threads and renicing them.
    const gone = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8')) + 1;
    expect(() => setPriority(gone, 19)).toThrow(/ESRCH/);
    expect(() => setThreadNice(gone, 19)).not.toThrow();
  });
});
