/** A process's log as it comes (e.g. a nats-server's `onLog`), and waits for lines of it. */
export interface LogWatch {
  /** Feed it what the process logs. */
  append(text: string): void;
  /** How much has been logged: a mark to wait from. */
  mark(): number;
  /** Resolves with the first line after `from` (logged so far or later) matching `pattern`; fails after `withinMs`, showing the log. */
  logged(pattern: RegExp, from?: number): Promise<string>;
}

export function watchLog(name: string, withinMs = 20_000): LogWatch {
  let log = '';
  const waiters = new Set<() => void>();
  return {
    append(text) {
      log += text;
      for (const check of [...waiters]) check();
    },
    mark: () => log.length,
    logged: (pattern, from = 0) =>
      new Promise<string>((resolve, reject) => {
        const check = () => {
          const line = log
            .slice(from)
            .split('\n')
            .find((candidate) => pattern.test(candidate));
          if (line === undefined) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(line);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${name} logged no line matching ${pattern}:\n${log.slice(from)}`));
        }, withinMs);
        waiters.add(check);
        check();
      }),
  };
}
