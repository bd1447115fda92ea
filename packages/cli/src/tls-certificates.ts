import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { invalidInput, unavailable } from '@polish/protocol';

// A private certificate authority for one deployment, made with the `openssl` binary (the
// reference implementation, in every Debian): a CA, a server certificate for the names and
// addresses clients dial, and client certificates for mutual TLS. The CA's private key lives
// only in a private temporary folder while the certificates are signed, then is deleted: nobody
// can issue another certificate this deployment trusts.

/** A certificate and its private key, in PEM. */
export interface Pem {
  cert: string;
  key: string;
}

/** What `issueCertificates` makes: the CA's certificate, the server's pair, and one pair per client name. */
export interface Certificates {
  ca: string;
  server: Pem;
  clients: Record<string, Pem>;
}

/** Validity of every certificate, in days. */
export const CERTIFICATE_DAYS = 825;

const INSTALL_HINT = 'install it (Debian/Ubuntu: `apt-get install openssl`; macOS: `brew install openssl`)';

function openssl(args: string[], cwd: string): void {
  const outcome = spawnSync(process.env.POLISH_OPENSSL ?? 'openssl', args, { cwd, encoding: 'utf8' });
  if ((outcome.error as NodeJS.ErrnoException | undefined)?.code === 'ENOENT')
    throw unavailable(`--tls needs the openssl command, which is not installed: ${INSTALL_HINT}`);
  if (outcome.error) throw unavailable(`openssl ${args[0]}: ${outcome.error.message}`);
  if (outcome.status !== 0)
    throw unavailable(
      `openssl ${args.slice(0, 2).join(' ')} failed (exit ${outcome.status}): ${outcome.stderr.trim()}`,
    );
}

const NEW_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** Parses `--tls-names`: DNS names or IP addresses, comma-separated, as subjectAltName entries. */
export function subjectAltNames(names: readonly string[]): string {
  return names
    .map((name) => {
      if (isIP(name)) return `IP:${name}`;
      if (
        /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(
          name,
        )
      )
        return `DNS:${name}`;
      throw invalidInput('tls-names', `"${name}" is neither a host name nor an IP address`);
    })
    .join(',');
}

/** Signs a new key pair's certificate with the CA in `work`; `extensions` are openssl extension lines. */
function issue(work: string, name: string, subject: string, extensions: string[]): Pem {
  const file = (suffix: string) => join(work, `${name}.${suffix}`);
  openssl(['req', '-new', ...NEW_KEY, '-keyout', file('key'), '-out', file('csr'), '-subj', subject], work);
  writeFileSync(file('ext'), `${extensions.join('\n')}\n`);
  openssl(
    [
      'x509',
      '-req',
      '-in',
      file('csr'),
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca-key.pem',
      '-set_serial',
      `0x${randomBytes(16).toString('hex')}`,
      '-days',
      String(CERTIFICATE_DAYS),
      '-sha256',
      '-extfile',
      file('ext'),
      '-out',
      file('pem'),
    ],
    work,
  );
  return { cert: readFileSync(file('pem'), 'utf8'), key: readFileSync(file('key'), 'utf8') };
}

/**
 * Makes a new CA and signs a server certificate for `serverNames` (host names and IP addresses
 * clients dial) and a client certificate for each of `clientNames` (its common name). Every key
 * is P-256; the CA's key never leaves a private temporary folder, removed before returning.
 */
export function issueCertificates(serverNames: readonly string[], clientNames: readonly string[]): Certificates {
  const altNames = subjectAltNames(serverNames);
  const work = mkdtempSync(join(tmpdir(), 'polish-ca-'));
  try {
    const tag = randomBytes(4).toString('hex');
    openssl(
      [
        'req',
        '-x509',
        ...NEW_KEY,
        '-keyout',
        'ca-key.pem',
        '-out',
        'ca.pem',
        '-days',
        String(CERTIFICATE_DAYS),
        '-sha256',
        '-subj',
        `/CN=polish NATS CA ${tag}`,
        '-addext',
        'basicConstraints=critical,CA:TRUE,pathlen:0',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      ],
      work,
    );
    const leaf = (usage: string) => [
      'basicConstraints=critical,CA:FALSE',
      'keyUsage=critical,digitalSignature',
      `extendedKeyUsage=${usage}`,
    ];
    // clientAuth too: in a cluster each node dials its routes as a client with this certificate.
    const server = issue(work, 'server', `/CN=${serverNames[0] ?? 'localhost'}`, [
      ...leaf('serverAuth,clientAuth'),
      `subjectAltName=${altNames}`,
    ]);
    const clients = Object.fromEntries(
      clientNames.map((name) => [name, issue(work, `client-${name}`, `/CN=${name}`, leaf('clientAuth'))]),
    );
    return { ca: readFileSync(join(work, 'ca.pem'), 'utf8'), server, clients };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
