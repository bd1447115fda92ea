// A bench-only agent process: answers every polish task subject with the real handlers and an
// instant scripted model, many tasks at once (unlike polish workers, one task each), so that one
// orchestrator can be driven with 1,000 concurrent runs. With HOLD=n it keeps the first evaluate
// task of every run until n are held, then answers them all: every run is in flight at once.
import { connect } from '@nats-io/transport-node';
import { createScriptedProvider, handleTask, loadScriptFile } from '@polish/agents';
import { taskSubject } from '@polish/protocol';

const { NATS_URL, SCRIPT, HOLD } = process.env;
const hold = Number(HOLD ?? 0);
const model = createScriptedProvider(loadScriptFile(SCRIPT));
const connection = await connect({ servers: NATS_URL });
const held = [];
let released = hold === 0;

const answer = async (message) => message.respond(JSON.stringify(await handleTask(message.json(), model)));

for (const role of ['criteria', 'evaluate', 'revise']) {
  connection.subscribe(taskSubject(role), {
    queue: role,
    callback: (_error, message) => {
      if (!released && role === 'evaluate' && message.json().attempt === 1) {
        held.push(message);
        if (held.length === hold) {
          // Every run is waiting on its first evaluation now: the orchestrator measures itself.
          connection.publish('bench.all-held', '');
        }
        return;
      }
      void answer(message);
    },
  });
}
connection.subscribe('bench.release', {
  callback: () => {
    released = true;
    for (const message of held.splice(0)) void answer(message);
  },
});
await connection.flush();
process.send?.('ready');
process.on('SIGTERM', () => void connection.drain().then(() => process.exit(0)));
