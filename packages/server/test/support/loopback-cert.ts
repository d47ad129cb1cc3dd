import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * A self-signed P-256 certificate for 127.0.0.1, valid one day, made by the real `openssl`
 * into `dir`: the PEM file paths of the key and the certificate.
 *
 * @example
 * const { key, cert } = loopbackCertificate(scratch().dir);
 */
export function loopbackCertificate(dir: string): { readonly key: string; readonly cert: string } {
  const key = join(dir, 'key.pem');
  const cert = join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      key,
      '-out',
      cert,
      '-days',
      '1',
    ].concat(['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1']),
    { stdio: 'ignore' },
  );
  return { key, cert };
}
