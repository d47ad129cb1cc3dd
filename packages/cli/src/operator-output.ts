import type { AuditEventJson } from '@svc/client';
import type { DeviceJson, GroupJson, LinkJson, SessionJson, UserJson } from '@svc/core';
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

/**
 * Prints a page of users as `svc auth users` does: `{"users": [...], "next"}` with `json`, else
 * a table with a header row and, when there is a next page, the command that reads it.
 *
 * @example
 * printUsers(page, args.values.json === true);
 */
export function printUsers(page: { readonly users: readonly UserJson[]; readonly next: string | null }, json: boolean): void {
  if (json) {
    printJson(page);
    return;
  }
  if (page.users.length === 0) printLine('no users');
  else
    printTable(
      ['SUBJECT', 'REALM', 'STATUS', 'NAME', 'EMAIL', 'GROUPS', 'LAST SIGN-IN'],
      page.users.map((u) => [
        u.subject,
        u.realm,
        u.status,
        u.name ?? '-',
        u.email === null ? '-' : `${u.email}${u.email_verified ? '' : ' (unverified)'}`,
        u.groups.length === 0 ? '-' : u.groups.join(','),
        u.last_sign_in_at ?? '-',
      ]),
    );
  if (page.next !== null) printText(`more: svc auth users --after ${page.next} (with the same filters)`);
}

/**
 * Prints one user as `svc auth users show` does: `{"user": ...}` with `json` (plus `extra`),
 * else one `field: value` line each, and where each attribute came from.
 *
 * @example
 * printUser(user, args.values.json === true);
 */
export function printUser(user: UserJson, json: boolean, extra: Record<string, unknown> = {}): void {
  if (json) {
    printJson({ user, ...extra });
    return;
  }
  const source = (s: string | null) => (s === null ? '' : ` (from ${s})`);
  printTable(
    ['FIELD', 'VALUE'],
    [
      ['subject', user.subject],
      ['realm', user.realm],
      ['status', user.status + (user.disabled_at === null ? '' : ` since ${user.disabled_at}`)],
      ['name', (user.name ?? '-') + source(user.sources.name)],
      [
        'email',
        (user.email === null ? '-' : `${user.email}${user.email_verified ? ' (verified)' : ' (unverified)'}`) + source(user.sources.email),
      ],
      ['groups', (user.groups.length === 0 ? '-' : user.groups.join(',')) + source(user.sources.groups)],
      ['user name', user.user_name ?? '-'],
      ['external id', user.external_id ?? '-'],
      ['created', user.created_at],
      ['updated', user.updated_at],
      ['last sign-in', user.last_sign_in_at ?? '-'],
    ],
  );
}

/**
 * Prints groups as `svc auth groups` does: `{"groups": [...]}` with `json`, else a table.
 *
 * @example
 * printGroups(groups, args.values.json === true);
 */
export function printGroups(groups: readonly GroupJson[], json: boolean): void {
  if (json) printJson({ groups });
  else if (groups.length === 0) printLine('no groups');
  else
    printTable(
      ['REALM', 'NAME', 'MEMBERS', 'ID'],
      groups.map((g) => [g.realm, g.name, String(g.members), g.id ?? '-']),
    );
}
