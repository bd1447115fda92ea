// The tests' fake Anthropic Messages API (test/support/fake-model-server.ts), answering every
// request at once with the same evaluation, in a process of its own: the CPU the benchmark
// counts is then the runtime's and the real SDK's, not the fake server's. No LLM is called.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

const SERVER = `
const { startFakeModelServer } = await import(${JSON.stringify(new URL('../test/support/fake-model-server.ts', import.meta.url).href)});
const { anthropicDialect } = await import(${JSON.stringify(new URL('../test/support/fake-anthropic.ts', import.meta.url).href)});
const answer = JSON.parse(process.env.FAKE_ANSWER);
const server = await startFakeModelServer(anthropicDialect, () => ({ answer }));
// Requests are not kept: this one serves thousands.
setInterval(() => server.requests.splice(0), 1000).unref();
console.log(server.url);
process.stdin.resume();
process.stdin.on('end', () => server.stop().then(() => process.exit(0)));
`;

/** Starts the fake API answering `answer` to every request; `stop()` ends it. */
export async function startFakeAnthropic(answer) {
  const child = spawn(process.execPath, ['--input-type=module', '-e', SERVER], {
    env: { ...process.env, FAKE_ANSWER: JSON.stringify(answer) },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = once(child, 'exit');
  const [url] = await Promise.race([
    once(createInterface({ input: child.stdout }), 'line'),
    exited.then(([code]) => Promise.reject(new Error(`the fake Anthropic API exited (${code}) before it listened`))),
  ]);
  return {
    url,
    pid: child.pid,
    async stop() {
      child.stdin.end();
      await exited;
    },
  };
}
