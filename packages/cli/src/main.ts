#!/usr/bin/env node
import { Command, CommanderError, Option } from 'commander';
import { PolishError } from '@polish/protocol';
import { runCommand } from './commands/run.js';
import { demoCommand } from './commands/demo.js';
import { InputError } from './input-error.js';
import { EXIT } from './exit-codes.js';

const program = new Command()
  .name('polish')
  .description('Evaluator-optimizer loops between LLM agents: lock criteria, evaluate, revise until they pass.')
  .exitOverride()
  .configureOutput({ writeErr: (text) => process.stderr.write(text) });

program
  .command('run')
  .description('polish an artifact until its criteria pass or the cap is reached')
  .argument('<file>', 'the artifact to polish, or - for standard input')
  .option('--goal <text>', 'what the artifact must achieve (required)')
  .option('--criteria <file>', 'JSON list of 1..8 criteria {id, text}; skips wave 1')
  .option('--threshold <threshold>', 'pass_all (default) or pass_N: at least N criteria pass')
  .option('--cap <n>', 'most evaluations, 1..8 (default 4)')
  .option('--out <file>', 'write the final artifact here instead of standard output')
  .option('--json', 'print the result object as JSON on standard output')
  .addOption(new Option('--provider <name>', 'model provider').choices(['scripted']).default('scripted'))
  .option('--script <file>', 'answers for the scripted provider (YAML or JSON)')
  .action(async (file: string, flags) => {
    process.exitCode = await runCommand(file, flags);
  });

program
  .command('demo')
  .description('run the bundled example with the scripted model (no LLM, no key needed)')
  .option('--json', 'print the result object as JSON on standard output')
  .action(async (flags) => {
    process.exitCode = await demoCommand(flags);
  });

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    // Help and version exit 0; usage mistakes are invalid input.
    process.exitCode = error.exitCode === 0 ? 0 : EXIT.INVALID_INPUT;
  } else if (error instanceof InputError) {
    process.stderr.write(`polish: invalid input: ${error.message}\n`);
    process.exitCode = EXIT.INVALID_INPUT;
  } else if (error instanceof PolishError && error.code === 'INVALID_INPUT') {
    process.stderr.write(`polish: invalid input: ${error.message}\n`);
    process.exitCode = EXIT.INVALID_INPUT;
  } else {
    process.stderr.write(`polish: internal error (please report): ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = EXIT.INTERNAL;
  }
}
