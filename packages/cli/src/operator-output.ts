import type { AuditEventJson } from '@svc/client';
import type { DeviceJson, LinkJson, SessionJson } from '@svc/core';
import { printJson, printLine, printTable, printText } from './output.js';

/**
 * Prints devices as `svc auth devices` does, whether they came from the project or the API:
 * `{"devices": [...]}` with `json`, else a table with a header row.
 *
 * @example
 * printDevices(devices, args.values.json === true);
 */
export function printDevices(devices: readonly DeviceJson[], json: boolean): void {
  if (json) printJson({ devices });
  else if (devices.length === 0) printLine('no devices enrolled');
  else
    printTable(
      ['ID', 'REALM', 'SUBJECT', 'CREATED', 'PUBLIC KEY', 'NAME'],
      devices.map((d) => [d.id, d.realm, d.subject, d.created_at, d.public_key, d.name]),
    );
}

/**
 * Prints links as `svc auth links` does: `{"links": [...]}` with `json`, else a table with a
 * header row. A credential's own data (a passkey's public key) is never part of a listing.
 *
 * @example
 * printLinks(links, args.values.json === true);
 */
export function printLinks(links: readonly LinkJson[], json: boolean): void {
  if (json) printJson({ links });
  else if (links.length === 0) printLine('no links');
  else
    printTable(
      ['ID', 'REALM', 'SUBJECT', 'PROVIDER', 'ISSUER', 'EXTERNAL SUBJECT', 'CREATED', 'LAST USED', 'NAME'],
      links.map((l) => [l.id, l.realm, l.subject, l.provider, l.issuer, l.external_subject, l.created_at, l.last_used_at ?? '-', l.name]),
    );
}

/**
 * Prints sessions as `svc auth sessions` does: `{"sessions": [...]}` with `json`, else a table
 * with a header row. No token material is ever part of a session listing.
 *
 * @example
 * printSessions(sessions, args.values.json === true);
 */
export function printSessions(sessions: readonly SessionJson[], json: boolean): void {
  if (json) printJson({ sessions });
  else if (sessions.length === 0) printLine('no active sessions');
  else
    printTable(
      ['ID', 'REALM', 'SUBJECT', 'DEVICE', 'CREATED', 'EXPIRES', 'GENERATION', 'ADDRESS', 'USER AGENT'],
      sessions.map((s) => [
        s.id,
        s.realm,
        s.subject,
        s.device_id,
        s.created_at,
        s.expires_at,
        String(s.generation),
        s.client_address ?? '-',
        s.user_agent ?? '-',
      ]),
    );
}

/**
 * Prints one audit event as `svc auth audit` does: one JSON line with `json`, else
 * `#SEQ AT TYPE key=value...` with every control and bidi character escaped, so an event's data
 * (a challenge id an unauthenticated caller chose, a device name) cannot forge a line or send
 * the terminal a sequence.
 *
 * @example
 * printAuditEvent(auditEventToJson(event), false);
 */
export function printAuditEvent(event: AuditEventJson, json: boolean): void {
  if (json) {
    printJson(event);
    return;
  }
  const who = [
    event.realm === null ? null : `realm=${event.realm}`,
    event.subject === null ? null : `subject=${event.subject}`,
    event.device_id === null ? null : `device=${event.device_id}`,
    event.session_id === null ? null : `session=${event.session_id}`,
    ...Object.entries(event.data).map(([k, v]) => `${k}=${String(v)}`),
  ].filter((x) => x !== null);
  printText(`#${event.seq} ${event.at} ${event.type} ${who.join(' ')}`);
}
