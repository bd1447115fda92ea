import { spawnSync } from 'node:child_process';

// Where a critique command runs (DESIGN §5, issue 15): the command is code a model may have
// written, so it gets no secret of the worker and cannot see, outlive or signal anything outside.
//
// With namespaces (util-linux `unshare`, Debian's util-linux): the command is PID 1 of its own
// PID namespace with its own /proc (it sees only its own processes: no /proc/<worker>/environ),
// its own mount, IPC and UTS namespaces, and when it ends or is killed every process it started
// dies with it, setsid or not. Run by root, it also drops to an unprivileged user (nobody); run by
// another user, it runs in a user namespace mapped to that user. Without namespaces there is no
// sandbox, and the worker refuses commands unless its operator allowed that.

/** The unprivileged user and group commands run as when the worker is root. */
export const SANDBOX_UID = 65534;
export const SANDBOX_GID = 65534;

/** Environment variables a command always gets (values from the worker, never secrets). */
const ALWAYS = ['PATH', 'LANG', 'LC_ALL', 'TZ', 'TERM'];

/** How a command will be run. */
export interface SandboxPlan {
  kind: 'namespaces' | 'none';
  /** The program and its arguments that run `sh -c <command>`. */
  argv: (command: string) => string[];
  /** Whether the workspace must be handed to the unprivileged user. */
  dropsToUser: boolean;
}

/**
 * What runs the command inside the namespaces, dropping every capability for good: an empty
 * bounding set (so `sh`, exec'd as root of its user namespace, or a setuid program it runs,
 * gains none; without it root there could unmount its /proc and see the machine's) and no new
 * privileges. Run by root, it also becomes nobody with no supplementary groups.
 */
function dropArgs(asRoot: boolean): string[] {
  const user = asRoot ? [`--reuid=${SANDBOX_UID}`, `--regid=${SANDBOX_GID}`, '--clear-groups'] : [];
  return ['setpriv', ...user, '--bounding-set=-all', '--inh-caps=-all', '--no-new-privs', '--'];
}

/**
 * The sandbox this machine offers (with `unshare` and `setpriv` from this PATH), found by trying
 * it once with `true`. `asRoot` says who runs it: root gets plain namespaces and drops to nobody,
 * any other user a user namespace mapped to itself.
 */
export function planSandbox(
  environment: NodeJS.ProcessEnv = process.env,
  asRoot = process.getuid?.() === 0,
): SandboxPlan {
  const base = ['--pid', '--fork', '--kill-child', '--mount-proc', '--ipc', '--uts'];
  const args = asRoot ? base : ['--user', '--map-root-user', ...base];
  const argv = (command: string) => ['unshare', ...args, ...dropArgs(asRoot), 'sh', '-c', command];
  const [program = 'unshare', ...rest] = argv('true');
  const probe = spawnSync(program, rest, { stdio: 'ignore', timeout: 5_000, env: { PATH: environment.PATH ?? '' } });
  if (probe.status !== 0) return { kind: 'none', argv: (command) => ['sh', '-c', command], dropsToUser: false };
  return { kind: 'namespaces', argv, dropsToUser: asRoot };
}

/**
 * The command's environment, from an allow-list: PATH, LANG, LC_ALL, TZ, TERM, the names the
 * worker's operator allows (`--command-env`), and HOME and TMPDIR in the workspace. Nothing else
 * of the worker's environment (keys, tokens, NATS credentials, database passwords) ever reaches it.
 */
export function commandEnvironment(
  environment: NodeJS.ProcessEnv,
  allowed: readonly string[],
  workspace: string,
): NodeJS.ProcessEnv {
  const names = new Set([...ALWAYS, ...allowed]);
  return {
    ...Object.fromEntries(
      Object.entries(environment).filter(([name, value]) => names.has(name) && value !== undefined),
    ),
    HOME: workspace,
    TMPDIR: workspace,
  };
}

/** Names whose values are secrets wherever they appear. */
const SECRET_NAME = /KEY|TOKEN|SECRET|PASS|PWD|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|SIGNATURE|DSN|CONNECTION/i;

/**
 * Every secret value the worker knows of, to be cut out of anything a command printed: the
 * values of its secret-looking variables (any case), of variables the command was not given
 * that look like keys (long, no spaces), and the passwords inside its own configuration.
 */
export function knownSecrets(environment: NodeJS.ProcessEnv, given: NodeJS.ProcessEnv): string[] {
  const found = new Set<string>();
  for (const [name, value] of Object.entries(environment)) {
    if (!value || value.length < 6) continue;
    if (SECRET_NAME.test(name)) found.add(value);
    else if (!(name in given) && value.length >= 16 && !/\s/.test(value) && !value.includes('/')) found.add(value);
    // JSON settings (the worker's own config holds its NATS password): every string inside that looks secret.
    if (value.startsWith('{')) {
      for (const match of value.matchAll(/"(pass|password|token|secret|key|seed)"\s*:\s*"([^"]{6,})"/gi)) {
        if (match[2]) found.add(match[2]);
      }
    }
  }
  // Longest first, so a secret containing another is cut whole.
  return [...found].sort((a, b) => b.length - a.length);
}

/** The text with every known secret value replaced by `[redacted]`. */
export function redact(text: string, secrets: readonly string[]): string {
  let clean = text;
  for (const secret of secrets) clean = clean.split(secret).join('[redacted]');
  return clean;
}
