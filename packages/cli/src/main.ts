import { Command, CommanderError, Option } from 'commander';
import { startTelemetry } from '@polish/agents';
import { runCommand } from './commands/run.js';
import { demoCommand } from './commands/demo.js';
import { workerCommand } from './commands/worker.js';
import { serveCommand } from './commands/serve.js';
import { controlCommand } from './commands/control.js';
import { policyEvaluateCommand, policyValidateCommand } from './commands/policy.js';
import {
  checkpointAdvanceCommand,
  checkpointMigrateCommand,
  checkpointValidateCommand,
  doctorCommand,
} from './commands/policy-checkpoint.js';
import { parDecideCommand, parResumeCommand, parRunCommand } from './commands/par.js';
import { registerMemoryCommands } from './commands/memory.js';
import { inspectCommand } from './commands/inspect.js';
import { natsConfigCommand } from './commands/nats-config.js';
import { EXIT, describeFailure } from './exit-codes.js';

const program = new Command()
  .name('polish')
  .description('Evaluator-optimizer loops between LLM agents: lock criteria, evaluate, revise until they pass.')
  .exitOverride()
  .configureOutput({ writeErr: (text) => process.stderr.write(text) });

const modelOptions = (command: Command) =>
  command
    .option('--model <spec>', 'model for every role, as provider:model[@baseURL] (default anthropic:claude-sonnet-5-5)')
    .option('--criteria-model <spec>', 'model for wave 1 (criteria)')
    .option(
      '--evaluator-model <spec>',
      'model for wave 2 (evaluate); another family than the reviser reduces self-preference',
    )
    .option('--reviser-model <spec>', 'model for wave 3 (revise)')
    .option('--actor-model <spec>', 'plan-act-reflect: model of the agent that plans and acts')
    .option('--reviewer-model <spec>', 'plan-act-reflect: model of the stateless reviewer (--critique review)')
    .option('--config <file>', 'config file (YAML or JSON): models, max_tokens, timeout_seconds, max_retries, prices')
    .addOption(
      new Option('--provider <name>', 'with --script: the scripted provider (same as --model scripted:FILE)').choices([
        'scripted',
      ]),
    )
    .option('--script <file>', 'answers for the scripted provider (YAML or JSON)');

/** How a command reaches a NATS that enforces identities or TLS: the credentials file, and TLS files over it. */
const natsAccessOptions = (command: Command) =>
  command
    .option('--credentials <file>', 'the credentials file of `polish nats-config` (default $POLISH_NATS_CREDENTIALS)')
    .option(
      '--tls-ca <file>',
      "the CA certificate that signed the NATS server's (`polish nats-config --tls`: tls/ca.pem)",
    )
    .option('--tls-cert <file>', 'a client certificate, for a server that verifies clients (`--mtls`)')
    .option('--tls-key <file>', "the client certificate's private key");

/** How long tasks may wait and work: the queue's settings, for whoever orchestrates. */
const queueOptions = (command: Command) =>
  command
    .option(
      '--task-timeout <seconds>',
      'how long a worker may work on one task before it is handed to another (default 300)',
    )
    .option(
      '--worker-wait <seconds>',
      "how long a task waits while no worker pulls from its role's queue before the run fails (default 30)",
    )
    .option(
      '--queue-wait <seconds>',
      'how long a task may wait in the queue while the workers are busy (default: no limit)',
    )
    .option(
      '--task-lease <seconds>',
      'how long a worker may go silent before its task is handed to another (default 30)',
    );

const topologyOptions = (command: Command) =>
  natsAccessOptions(
    queueOptions(
      command
        .option(
          '--nats <url>',
          'use this NATS and the workers started there with `polish worker` (default: $NATS_URL, else embedded)',
        )
        .option('--pool <n>', 'embedded: idle worker processes kept ready per role (default 1)')
        .option(
          '--max-workers <n>',
          'embedded: worker processes alive at once (default: 4 per core, within half the memory)',
        )
        .option('--reuse <n>', 'embedded: tasks per worker process (default 1: one task per process)')
        .option(
          '--state-dir <dir>',
          'embedded: state folder (default $XDG_STATE_HOME/polish or ~/.local/state/polish)',
        ),
    ),
  )
    .option(
      '--inspect [inspector]',
      "watch the run in the local inspector page (or `stately`: Stately's hosted inspector, online only)",
    )
    .option('--inspect-port <port>', 'port of the local inspector page (default 4800; 0 picks a free one)');

modelOptions(
  topologyOptions(
    program
      .command('run')
      .description('polish an artifact until its criteria pass or the cap is reached')
      .argument('<file>', 'the artifact to polish, or - for standard input')
      .option('--goal <text>', 'what the artifact must achieve (required)')
      .option('--criteria <file>', 'JSON list of 1..8 criteria {id, text}; skips wave 1')
      .option('--threshold <threshold>', 'pass_all (default) or pass_N: at least N criteria pass')
      .option('--cap <n>', 'most evaluations, 1..8 (default 4)')
      .option(
        '--revise-mode <mode>',
        'how wave 3 answers: auto (default: edits for artifacts of 4,000+ characters, else the whole text), edits, full',
      )
      .option('--evaluators <specs>', 'a quorum of judges, one model spec each, comma-separated (2..5 judges)')
      .option('--quorum <rule>', 'how the judges decide a criterion: majority (default), unanimous, any-fail')
      .option('--evidence', 'every passing score quotes the artifact span that satisfies it (the default)')
      .option('--no-evidence', 'passes need no quote')
      .option(
        '--max-usd <dollars>',
        'stop BUDGET_EXHAUSTED (exit 8) before a wave the rest of this budget cannot cover',
      )
      .option('--max-tokens <n>', 'the same, in tokens (input, output and cache)')
      .option('--out <file>', 'write the final artifact here instead of standard output')
      .option('--json', 'print the result object as JSON on standard output')
      .option('--local', 'with --nats: orchestrate in this process even if a `polish serve` runs there'),
  ),
).action(async (file: string, flags) => {
  process.exitCode = await runCommand(file, flags);
});

topologyOptions(
  program
    .command('demo')
    .description('run the bundled example with the scripted model (no LLM, no key needed)')
    .option('--json', 'print the result object as JSON on standard output'),
).action(async (flags) => {
  process.exitCode = await demoCommand(flags);
});

modelOptions(
  natsAccessOptions(
    program
      .command('worker')
      .description('keep a warm pool of single-use agent worker processes connected to NATS')
      .option('--roles <roles>', 'comma-separated roles to serve', 'criteria,evaluate,revise')
      .option('--pool <n>', 'idle worker processes kept ready per role, within --max-workers (default 2)')
      .option(
        '--max-workers <n>',
        'worker processes alive at once, whatever the load (default: 4 per core, within half the memory)',
      )
      .option('--reuse <n>', 'tasks one process serves before it exits (default 1; more is weaker isolation)')
      .option(
        '--background-boots',
        'boot reserve workers at the lowest priority until ready or a task waits for them (Linux, needs CAP_SYS_NICE; default off)',
      )
      .option('--no-background-boots', 'boot every worker at normal priority (the default)')
      .option('--boot-concurrency <n>', 'worker processes booting at once (default: the cores)')
      .option(
        '--successor-quiet <ms>',
        'replace a worker that answered on the CPU once no task was taken or answered for this long, ' +
          'while its role has an idle worker (default 15; 0: at the answer)',
      )
      .option(
        '--allow-unsandboxed',
        'par.command: run critique commands where no sandbox (user and PID namespaces) can be made',
      )
      .option(
        '--command-env <names>',
        'par.command: variables critique commands may see, besides PATH, LANG, LC_ALL, TZ, TERM',
      )
      .option('--revise-mode <mode>', 'how revise workers answer: auto (default), edits or full')
      .option('--no-evidence', 'evaluate workers accept passes without a quoted span of the artifact')
      .option(
        '--lane',
        "evaluate workers serve their model's lane: the judges of runs whose --evaluators name that model (instead of the plain evaluate queue)",
      )
      .option('--nats <url>', 'NATS server URL (default $NATS_URL)'),
  ),
).action(async (flags) => {
  process.exitCode = await workerCommand(flags);
});

natsAccessOptions(
  queueOptions(
    program
      .command('serve')
      .description('run a long-lived orchestrator: takes runs over NATS, persists every step, resumes after a restart')
      .option('--nats <url>', 'NATS server URL, with JetStream (default $NATS_URL)')
      .option('--id <name>', "this orchestrator's name; it resumes the unfinished runs it owns (default: the hostname)")
      .option('--grace <seconds>', 'on SIGTERM or Ctrl-C, how long to stop cleanly before exiting anyway (default 10)'),
  ).option(
    '--replicas <n>',
    'copies JetStream keeps of the runs bucket, artifacts and events, 1..5 (default 1; 3 in a 3-node NATS cluster)',
  ),
).action(async (flags) => {
  process.exitCode = await serveCommand(flags);
});

const controlOptions = (command: Command) =>
  natsAccessOptions(
    command.option('--nats <url>', 'NATS server URL where `polish serve` runs (default $NATS_URL)'),
  ).option('--json', 'print JSON');

controlOptions(program.command('status').description('show one run, or every run').argument('[runId]')).action(
  async (runId: string | undefined, flags) => {
    process.exitCode = await controlCommand('status', runId, flags);
  },
);
controlOptions(program.command('list').description('list the runs the run service knows')).action(async (flags) => {
  process.exitCode = await controlCommand('list', undefined, flags);
});
controlOptions(program.command('cancel').description('cancel a run: it ends CANCELLED').argument('<runId>')).action(
  async (runId: string, flags) => {
    process.exitCode = await controlCommand('cancel', runId, flags);
  },
);
controlOptions(
  program
    .command('resume')
    .description('continue an unfinished run (e.g. of an orchestrator that is gone) here')
    .argument('<runId>'),
).action(async (runId: string, flags) => {
  process.exitCode = await controlCommand('resume', runId, flags);
});
controlOptions(
  program
    .command('extend')
    .description('give a run that reached its cap more iterations (criteria unchanged)')
    .argument('<runId>')
    .option('--cap <n>', 'the new cap, up to 8'),
).action(async (runId: string, flags) => {
  process.exitCode = await controlCommand('extend', runId, flags);
});

natsAccessOptions(
  program
    .command('inspect')
    .description('serve the local inspector page: every run on this NATS, live, with replay')
    .option('--nats <url>', 'NATS server URL (default $NATS_URL)')
    .option('--port <port>', 'port (default 4800; 0 picks a free one)')
    .option('--host <address>', 'address to bind (default 127.0.0.1: this machine only)'),
).action(async (flags) => {
  process.exitCode = await inspectCommand(flags);
});

program
  .command('nats-config')
  .description(
    'write a nats-server configuration with one identity per principal (allow-lists) and the credentials each process needs',
  )
  .option('--dir <folder>', 'where to write nats-server.conf, credentials.json, keys and certificates (made 0700)')
  .option('--port <port>', 'client port (default 4222)')
  .option('--host <address>', 'address to listen on (default 127.0.0.1; 0.0.0.0 for other machines)')
  .option('--store-dir <folder>', 'JetStream storage (default <dir>/jetstream)')
  .option('--nkeys', 'one NKEY per principal (each seed in its own file) instead of passwords')
  .option('--tls', 'a private CA and a server certificate: every connection must use TLS')
  .option('--mtls', 'also a client certificate per principal, which the server verifies (implies --tls)')
  .option(
    '--tls-names <names>',
    'host names and IP addresses clients dial, comma-separated, for the server certificate (localhost and 127.0.0.1 always)',
  )
  .action((flags) => {
    process.exitCode = natsConfigCommand(flags);
  });

const policy = program
  .command('policy')
  .description('the plan-act-reflect policy engine (agent-collab-harness v1 files and v2 goal slices)');
policy
  .command('validate')
  .description('check a policy file (v1 or v2); exit 0 valid, 2 invalid')
  .option('--policy <file>', 'agent-policy-1 or agent-policy-2 JSON file')
  .option('--json', 'JSON output (always)')
  .action((flags) => {
    process.exitCode = policyValidateCommand(flags);
  });
policy
  .command('evaluate')
  .description('decide continue / checkpoint / stop; exit 0, 3, 4 (invalid input fails closed: stop, 4)')
  .option('--policy <file>', 'agent-policy-1 or agent-policy-2 JSON file')
  .option('--checkpoint <file>', 'task-checkpoint-1 or task-checkpoint-2 JSON file')
  .option('--json', 'JSON output (always)')
  .action((flags) => {
    process.exitCode = policyEvaluateCommand(flags);
  });
const checkpoint = policy.command('checkpoint').description('checkpoint operations (as `agent-collab checkpoint`)');
checkpoint
  .command('validate')
  .description('check a checkpoint file (v1 or v2); exit 0 valid, 2 invalid')
  .option('--checkpoint <file>', 'task-checkpoint-1 or task-checkpoint-2 JSON file')
  .option('--json', 'JSON output (always)')
  .action((flags) => {
    process.exitCode = checkpointValidateCommand(flags);
  });
checkpoint
  .command('advance')
  .description('advance an eligible v2 slice in place, once per request id (compare-and-swap); exit 0, 2 refused')
  .option('--checkpoint <file>', 'task-checkpoint-2 JSON file')
  .option('--policy <file>', 'agent-policy-2 JSON file')
  .option('--request-id <id>', 'a stable id for this transition: a repeat changes nothing')
  .option('--expected-sha256 <hash>', "the SHA-256 of the checkpoint file's bytes as you read it")
  .action((flags) => {
    process.exitCode = checkpointAdvanceCommand(flags);
  });
checkpoint
  .command('migrate')
  .description('write a v2 copy of a v1 checkpoint at a new path (the old file is untouched); exit 0, 2 refused')
  .option('--checkpoint <file>', 'task-checkpoint-1 JSON file')
  .option('--policy <file>', 'agent-policy-2 JSON file')
  .option('--metadata <file>', 'JSON object with exactly goal_id and next_step')
  .option('--output <file>', 'the new checkpoint (must not exist)')
  .action((flags) => {
    process.exitCode = checkpointMigrateCommand(flags);
  });
policy
  .command('doctor')
  .description('read-only configuration check (AGENT_COLLAB_POLICY, AGENT_COLLAB_HUMAN_KEYS_JSON); exit 0 ok, 2')
  .option('--json', 'JSON output (always)')
  .action(() => {
    process.exitCode = doctorCommand();
  });

const collect = (value: string, previous: string[] = []) => [...previous, value];
const parOptions = (command: Command) =>
  modelOptions(topologyOptions(command))
    .option('--topic <name>', "the task's topic: its files are .coord/par_<topic>.yml and .coord/par_<topic>_final.md")
    .option('--workspace <dir>', 'the project folder the agent works in (default: the current folder)')
    .option('--git', 'commit each cycle as `par(iter-N): <plan_summary>` (the workspace must be a git work tree)')
    .option(
      '--allow-unsandboxed',
      'embedded: run critique commands where no sandbox (user and PID namespaces) can be made',
    )
    .option(
      '--command-env <names>',
      'embedded: variables critique commands may see, besides PATH, LANG, LC_ALL, TZ, TERM',
    )
    .option('--json', 'print the outcome as JSON on standard output');

const par = program
  .command('par')
  .description('plan-act-reflect: one agent plans, acts and is critiqued until a policy says stop');
parOptions(
  par
    .command('run')
    .description(
      'start a task (or run a hand-written .coord/par_<topic>.yml); exit 0 pass, 3 checkpoint, 4 stop, 5 needs-human, 7 error',
    )
    .option('--goal <text>', 'what the task must achieve')
    .option('--acceptance <text>', 'an acceptance criterion (repeat for more): A1, A2, …', collect)
    .option(
      '--human-gate <text>',
      'a criterion only a signed human approval can pass (repeat for more): H1, H2, …',
      collect,
    )
    .option('--critique <source>', 'command, review, score or self (self is never enough for PASS)')
    .option('--command <shell>', 'command or score: the shell command run against the artifact in a temporary copy')
    .option('--threshold <number>', 'score: the lowest passing score (the last number the command prints)')
    .option('--critique-timeout <seconds>', 'command or score: how long the command may run (default 300)')
    .option(
      '--policy <file>',
      'the policy JSON file (agent-policy-1, or -2 for goal slices), relative to the workspace',
    )
    .option(
      '--checkpoint <file>',
      `the checkpoint file (task-checkpoint-1, or -2 under a v2 policy), relative to the workspace (default ${'.coord/task-checkpoint.json'})`,
    )
    .option(
      '--key-id <id>',
      'under a policy that pins human keys: the key that signs the task spec (default: the first whose secret is set)',
    ),
).action(async (flags) => {
  process.exitCode = await parRunCommand(flags);
});
parOptions(
  par
    .command('resume')
    .description('continue a task from its checkpoint (after a checkpoint, a human decision or an override)'),
).action(async (flags) => {
  process.exitCode = await parResumeCommand(flags);
});
par
  .command('decide')
  .description('sign a human decision on a gate into the checkpoint (key from AGENT_COLLAB_HUMAN_KEYS_JSON)')
  .option('--topic <name>', "the task's topic")
  .option('--workspace <dir>', 'the project folder (default: the current folder)')
  .option('--gate <id>', 'the human-gate criterion, e.g. H1')
  .option('--approve', 'approve the pending action')
  .option('--decline', 'decline it: the policy stops the task')
  .option('--revise', 'ask for a revision: the policy stops the task for rework')
  .option('--key-id <id>', "your key id in the policy's key_hashes")
  .option('--rationale <text>', 'why')
  .action((flags) => {
    process.exitCode = parDecideCommand(flags);
  });

registerMemoryCommands(program);

// Traces go out only when OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) is set; else the SDK is not even loaded.
const telemetry = await startTelemetry('polish');
try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    // Help and version exit 0; usage mistakes are invalid input.
    process.exitCode = error.exitCode === 0 ? 0 : EXIT.INVALID_INPUT;
  } else {
    const failure = describeFailure(error);
    process.stderr.write(`${failure.line}\n`);
    process.exitCode = failure.code;
  }
} finally {
  // Export the spans still buffered before the process ends.
  await telemetry.shutdown();
}
