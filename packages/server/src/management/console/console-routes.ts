import {
  type AuditCheckpointsJson,
  type AuditEvent,
  type AuthDeps,
  AuthError,
  addUser,
  auditEventToJson,
  getUser,
  type LinkableProvider,
  type LinkJson,
  listGroups,
  listLinks,
  listUsers,
  type Principal,
  prepareLinkPairing,
  preparePairing,
  redeemConsoleLink,
  removeDevice,
  removeUser,
  revokeSession,
  rfc3339,
  type UserActor,
  type UserJson,
  unlinkIdentity,
  updateUserCounting,
  userToJson,
} from '@svc/core';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { toAuthError } from '../../http/error-handling.js';
import { BODY_LIMIT } from '../../http/json-body.js';
import { sendProblem } from '../../http/problem.js';
import { html, type SafeHtml } from '../../pages/html.js';
import { newNonce, type PageViewer, renderPage, sendPage } from '../../pages/layout.js';
import { ConsoleCsrf, clearConsoleCookies, consolePrincipal, setConsoleCookies } from './console-session.js';

/** What the console shows beyond the store: the node's status (providers, components) and its providers for link intents. */
export interface ConsoleOptions {
  /** The node's status as `GET /edge/0-alpha/status` reports it; the console's Status page shows it. */
  readonly status?: () => Promise<unknown>;
  /** The providers this node runs, for link intents (pairing a passkey or a company login). */
  readonly providers?: readonly LinkableProvider[];
  /** Verifies the whole audit chain (as `svc auth audit verify` does); the Audit page offers it when given. */
  readonly verifyAudit?: () => Promise<
    | { readonly ok: true; readonly events: number; readonly head: string }
    | { readonly ok: false; readonly seq: number | null; readonly problem: string }
  >;
  /** The exported signed checkpoints, reviewed (the `GET /v1/auth/audit/checkpoints` source); the Audit page's verification lists them. */
  readonly auditCheckpoints?: (latest: number) => Promise<AuditCheckpointsJson>;
}

type Form = Record<string, string>;

interface ConsoleRequest {
  principal: Principal;
  viewer: PageViewer;
  csrf: string;
}

const NAV = [
  { href: '/console/users', label: 'Users' },
  { href: '/console/groups', label: 'Groups' },
  { href: '/console/sessions', label: 'Sessions & devices' },
  { href: '/console/audit', label: 'Audit trail' },
  { href: '/console/pairing', label: 'Pairing' },
  { href: '/console/status', label: 'Status' },
] as const;

const TITLES: Readonly<Record<number, string>> = {
  400: 'That request cannot be done',
  401: 'Sign in to the console',
  403: 'Not allowed',
  404: 'Not found',
  409: 'That change was refused',
  503: 'The service is unavailable',
};

/** Who acts from the console, as every user event records it. */
function actorOf(p: Principal): UserActor {
  return { via: 'console', subject: p.subject, session: p.session };
}

function wantsHtml(req: FastifyRequest): boolean {
  const accept = req.headers.accept;
  return typeof accept === 'string' && accept.toLowerCase().includes('text/html');
}

/** An id shortened for a table (`ses_01M8EY…FRG5XQ`); the full id is in the cell's `title` and links. */
function shortId(id: string): string {
  return id.length > 18 ? `${id.slice(0, 10)}…${id.slice(-6)}` : id;
}

/** A user agent cut to what a person reads. */
function shortAgent(agent: string): string {
  return agent.length > 60 ? `${agent.slice(0, 57)}…` : agent;
}

function when(iso: string | null): string {
  return iso === null ? '—' : iso.replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

/**
 * The management console under `/console/` (see docs/console.md): signed in by a one-time link
 * (`POST /v1/auth/console-links`, `svc auth console`), a session in `SameSite=Strict` HttpOnly
 * cookies, every state-changing request checked for its CSRF token and its `Origin`. Every action
 * is the core use case the management API route calls, audited with `via: "console"` and the
 * console session's principal. Loopback only: the management listener's guard runs first.
 *
 * @example
 * await app.register(consoleRoutes, { deps, console: { status } });
 */
export const consoleRoutes: FastifyPluginAsync<{ deps: AuthDeps; console?: ConsoleOptions; csrf?: ConsoleCsrf }> = async (app, opts) => {
  const { deps } = opts;
  const options = opts.console ?? {};
  const csrf = opts.csrf ?? new ConsoleCsrf();

  // Forms post `application/x-www-form-urlencoded`, here only (the API stays JSON-only).
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string', bodyLimit: BODY_LIMIT }, (_req, body, done) => {
    const form: Form = Object.create(null);
    for (const [k, v] of new URLSearchParams(typeof body === 'string' ? body : body.toString('utf8'))) form[k] = v;
    done(null, form);
  });

  app.setErrorHandler((err, req, reply) => {
    const e = toAuthError(err);
    if (e.status >= 500) req.log.error({ err }, 'console request failed');
    if (!wantsHtml(req)) return sendProblem(reply, e);
    const nonce = newNonce();
    const main =
      e.status >= 500
        ? html`<p class="error">Something went wrong on our side (${e.code}). Try again; if it keeps happening, look at the service log.</p>`
        : html`<p class="error">${e.message}</p><p class="muted">Code: <code>${e.code}</code></p>
           <p><a href="/console/users">Back to the console</a></p>`;
    return sendPage(reply, e.status, nonce, renderPage({ nonce, title: TITLES[e.status] ?? 'Refused', main, nav: [...NAV] }));
  });

  /** The signed-in console session, or a reply already sent (a sign-in hint page, or 401 problem+json). */
  async function signedIn(req: FastifyRequest, reply: FastifyReply): Promise<ConsoleRequest | null> {
    const principal = await consolePrincipal(deps, req, reply);
    if (principal === null) {
      if (!wantsHtml(req) || req.method !== 'GET') {
        sendProblem(reply, new AuthError('invalid_token', 'sign in to the console: run `svc auth console` on this machine'));
        return null;
      }
      const nonce = newNonce();
      sendPage(
        reply,
        401,
        nonce,
        renderPage({
          nonce,
          title: 'Sign in to the console',
          main: html`<p>The console signs you in with a one-time link. On this machine, run:</p>
<pre><code>svc auth console</code></pre>
<p>and open the URL it prints (it works once, for 60 seconds). You need a management device signed in with <code>svc auth login</code>.</p>`,
        }),
      );
      return null;
    }
    const user = await deps.store.getUser(principal.subject);
    // An operator without a name is shown by the device that signed in (`admin (device)`), not a bare subject id.
    const device =
      user?.name == null && user?.email == null
        ? (await deps.store.listDevices({ subject: principal.subject })).find((d) => d.id === principal.device)
        : undefined;
    return {
      principal,
      csrf: csrf.tokenFor(principal.session),
      viewer: {
        name: user?.name ?? (device === undefined ? null : `${device.name} (device)`),
        email: user?.email ?? null,
        subject: principal.subject,
        signOutPath: '/console/logout',
        csrfToken: csrf.tokenFor(principal.session),
      },
    };
  }

  /** A signed-in, CSRF-checked state-changing request; null when a refusal was sent. */
  async function changing(req: FastifyRequest, reply: FastifyReply): Promise<{ c: ConsoleRequest; form: Form } | null> {
    csrf.checkOrigin(req);
    const c = await signedIn(req, reply);
    if (c === null) return null;
    const form = (req.body ?? {}) as Form;
    csrf.check(req, c.principal.session, form.csrf);
    return { c, form };
  }

  function page(
    reply: FastifyReply,
    c: ConsoleRequest,
    title: string,
    current: string,
    main: SafeHtml,
    extra: { status?: number; script?: string; data?: Record<string, string> } = {},
  ): FastifyReply {
    const nonce = newNonce();
    const body = renderPage({
      nonce,
      title,
      main,
      viewer: c.viewer,
      nav: NAV.map((n) => ({ ...n, current: n.href === current })),
      ...(extra.script === undefined ? {} : { script: extra.script }),
      data: { console: '1', ...(extra.data ?? {}) },
    });
    return sendPage(reply, extra.status ?? 200, nonce, body, extra.script === undefined ? {} : { script: true, connect: true });
  }

  const hidden = (c: ConsoleRequest) => html`<input type="hidden" name="csrf" value="${c.csrf}">`;

  // ---- sign-in and sign-out ----

  app.get<{ Querystring: { code?: string } }>('/console/login', async (req, reply) => {
    try {
      const { pair } = await redeemConsoleLink(deps, {
        code: req.query.code,
        client: { address: req.ip, userAgent: req.headers['user-agent'] },
      });
      setConsoleCookies(reply, pair);
      return reply.code(303).header('cache-control', 'no-store').header('location', '/console/users').send();
    } catch (err) {
      const e = toAuthError(err);
      if (e.code !== 'invalid_flow') throw err;
      const nonce = newNonce();
      return sendPage(
        reply,
        400,
        nonce,
        renderPage({
          nonce,
          title: 'This sign-in link cannot be used',
          main: html`<p class="error">The link was already used, has expired (links work once, for 60 seconds), or was copied wrong.</p>
<p>On this machine, run <code>svc auth console</code> again and open the new URL.</p>`,
        }),
      );
    }
  });

  app.post('/console/logout', async (req, reply) => {
    const r = await changing(req, reply);
    if (r === null) return reply;
    await revokeSession(deps, { principal: r.c.principal });
    clearConsoleCookies(reply);
    const nonce = newNonce();
    return sendPage(
      reply,
      200,
      nonce,
      renderPage({
        nonce,
        title: 'Signed out',
        main: html`<p class="notice">You are signed out of the console. To come back, run <code>svc auth console</code> again.</p>`,
      }),
    );
  });

  app.get('/console', async (_req, reply) => reply.code(308).header('location', '/console/users').send());
  app.get('/console/', async (req, reply) => {
    const c = await signedIn(req, reply);
    if (c === null) return reply;
    return reply.code(303).header('location', '/console/users').send();
  });

  // ---- users ----

  app.get<{ Querystring: Record<string, string | undefined> }>('/console/users', async (req, reply) => {
    const c = await signedIn(req, reply);
    if (c === null) return reply;
    const q = req.query;
    const filter = q.filter?.trim() || undefined;
    const status = q.status === 'active' || q.status === 'disabled' ? q.status : undefined;
    const realm = q.realm === 'management' || q.realm === 'application' ? q.realm : undefined;
    const group = q.group?.trim() || undefined;
    const groups = await listGroups(deps, realm === undefined ? {} : { realm });
    const counts = new Map<string, number>();
    for (const g of groups) counts.set(g.name, (counts.get(g.name) ?? 0) + g.members);
    const groupCounts = [...counts.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
    // A subject id is looked up directly (the listing's text filter reads names and emails).
    const bySubject = filter !== undefined && /^sub_[0-9A-Z]{26}$/.test(filter) ? await deps.store.getUser(filter) : undefined;
    const pageOf =
      bySubject === undefined
        ? await listUsers(deps, { text: filter, status, realm, group, after: q.after || undefined, limit: 50 })
        : { users: bySubject === null ? [] : [userToJson(bySubject)], next: null };
    const params = (after: string) =>
      new URLSearchParams({
        ...(filter ? { filter } : {}),
        ...(status ? { status } : {}),
        ...(realm ? { realm } : {}),
        ...(group ? { group } : {}),
        after,
      }).toString();
    const option = (value: string, label: string, chosen: string | undefined) =>
      html`<option value="${value}"${chosen === value || (value === '' && chosen === undefined) ? html` selected` : ''}>${label}</option>`;
    const main = html`${q.done !== undefined && DONE[q.done] !== undefined && html`<p class="notice" role="status">${DONE[q.done]}</p>`}
<form method="get" action="/console/users" class="filters">
  <div class="field wide"><label for="f-text">Name, email or subject</label>
  <input type="search" id="f-text" name="filter" value="${filter ?? ''}"></div>
  <div class="field"><label for="f-status">Status</label>
  <select id="f-status" name="status">${option('', 'Any', status)}${option('active', 'Active', status)}${option('disabled', 'Disabled', status)}</select></div>
  <div class="field"><label for="f-group">Group</label>
  <select id="f-group" name="group">${option('', 'Any', group)}${groupCounts.map(([name, members]) => option(name, `${name} (${members})`, group))}</select></div>
  <div class="field"><label for="f-realm">Realm</label>
  <select id="f-realm" name="realm">${option('', 'Both', realm)}${option('application', 'Application', realm)}${option('management', 'Management', realm)}</select></div>
  <div class="actions"><button class="button primary" type="submit">Filter</button> <a class="button" href="/console/users">Clear</a></div>
</form>
${
  pageOf.users.length === 0
    ? html`<p class="notice">No user matches.</p>`
    : html`<div class="table-wrap"><table>
<caption class="muted">${pageOf.users.length} user${pageOf.users.length === 1 ? '' : 's'}${filter ? ` matching “${filter}”` : ''}${group ? ` in ${group}` : ''}${pageOf.next !== null ? ' on this page' : ''}</caption>
<thead><tr><th scope="col">User</th><th scope="col">Realm</th><th scope="col">Groups</th><th scope="col">Status</th><th scope="col">Last sign-in</th></tr></thead>
<tbody>${pageOf.users.map(
        (u) => html`<tr>
  <td><a href="/console/users/${u.subject}">${u.name ?? u.email ?? html`<code>${u.subject}</code>`}</a>${u.email !== null && u.name !== null ? html`<br><span class="muted">${u.email}</span>` : ''}</td>
  <td>${u.realm}</td><td>${u.groups.length === 0 ? '—' : u.groups.join(', ')}</td>
  <td>${u.status === 'disabled' ? html`<strong class="bad">Disabled</strong>` : 'Active'}</td>
  <td class="when">${when(u.last_sign_in_at)}</td></tr>`,
      )}</tbody></table></div>`
}
${pageOf.next !== null && html`<p><a class="button" href="/console/users?${params(pageOf.next)}">Next page</a></p>`}
<details>
<summary>Add a user</summary>
<form method="post" action="/console/users/new">
  ${hidden(c)}
  <p class="muted">A user without a credential yet: then pair a device to them or prepare a link intent (Pairing).</p>
  <label for="n-realm">Realm</label><select id="n-realm" name="realm"><option value="application" selected>Application</option><option value="management">Management</option></select>
  <label for="n-name">Name</label><input type="text" id="n-name" name="name" autocomplete="off">
  <label for="n-email">Email</label><input type="email" id="n-email" name="email" autocomplete="off">
  <label for="n-groups">Groups <span class="muted">(comma-separated)</span></label><input type="text" id="n-groups" name="groups" autocomplete="off">
  <div class="actions"><button class="button primary" type="submit">Add user</button></div>
</form>
</details>`;
    return page(reply, c, 'Users', '/console/users', main);
  });

  const DONE: Readonly<Record<string, string>> = {
    disabled: 'The user is disabled: their sessions were revoked and they cannot sign in.',
    enabled: 'The user is enabled: they can sign in again.',
    saved: 'The changes are saved.',
    added: 'The user is added. Pair a device to them or prepare a link intent on the Pairing page.',
    revoked: 'The session is revoked.',
    removed: 'The device is removed and its sessions revoked.',
    user_removed: 'The user is removed, with their devices and linked sign-ins; their sessions are revoked.',
    unlinked: 'The linked sign-in is removed and the sessions it signed in are revoked.',
  };

  function userPageOf(
    c: ConsoleRequest,
    u: UserJson,
    extras: { devices: SafeHtml; sessions: SafeHtml; links: SafeHtml; pairing: SafeHtml },
    done?: string,
  ): SafeHtml {
    const src = (s: string | null) => (s === null ? '' : html` <span class="muted">(from ${s})</span>`);
    return html`
${done !== undefined && DONE[done] !== undefined && html`<p class="notice" role="status">${DONE[done]}</p>`}
<dl class="facts">
  <dt>Name</dt><dd>${u.name ?? '—'}${src(u.sources.name)}</dd>
  <dt>Email</dt><dd>${u.email ?? '—'}${u.email !== null && (u.email_verified ? ' (verified)' : ' (not verified)')}${src(u.sources.email)}</dd>
  <dt>Groups</dt><dd>${u.groups.length === 0 ? '—' : u.groups.join(', ')}${src(u.sources.groups)}</dd>
  <dt>Status</dt><dd>${u.status === 'disabled' ? html`<strong class="bad">Disabled</strong> since ${when(u.disabled_at)}` : 'Active'}</dd>
  <dt>Subject</dt><dd><code>${u.subject}</code> (${u.realm} realm)</dd>
  <dt>Created</dt><dd>${when(u.created_at)}</dd>
  <dt>Last sign-in</dt><dd>${when(u.last_sign_in_at)}</dd>
</dl>
<form method="post" action="/console/users/${u.subject}/${u.status === 'disabled' ? 'enable' : 'disable'}">
  ${hidden(c)}
  ${
    u.status === 'disabled'
      ? html`<button class="button primary" type="submit">Enable user</button> <span class="muted">They can sign in again; revoked sessions stay revoked.</span>`
      : html`<button class="button danger" type="submit">Disable user</button> <span class="muted">Refuses their sign-ins and revokes every session at once.</span>`
  }
</form>
<h2>Edit</h2>
<form method="post" action="/console/users/${u.subject}/edit">
  ${hidden(c)}
  <label for="e-name">Name</label><input type="text" id="e-name" name="name" value="${u.name ?? ''}" autocomplete="off">
  <label for="e-email">Email</label><input type="email" id="e-email" name="email" value="${u.email ?? ''}" autocomplete="off">
  <label for="e-groups">Groups <span class="muted">(comma-separated)</span></label><input type="text" id="e-groups" name="groups" value="${u.groups.join(', ')}" autocomplete="off">
  <div class="actions"><button class="button primary" type="submit">Save</button></div>
</form>
<h2>Devices</h2>${extras.devices}
<h2>Sessions</h2>${extras.sessions}
<h2>Linked sign-ins</h2>${extras.links}
<h2>Pair or recover</h2>${extras.pairing}
<h2>Remove</h2>
<p><a class="button danger" href="/console/users/${u.subject}/remove">Remove user…</a> <span class="muted">Removes the user with their devices and linked sign-ins and revokes their sessions. You confirm on the next page.</span></p>`;
  }

  /** Who each subject is, for a table cell: name or email, else the subject id. */
  async function whoIs(subjects: readonly string[]): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const s of new Set(subjects)) {
      const u = await deps.store.getUser(s);
      out.set(s, u?.name ?? u?.email ?? shortId(s));
    }
    return out;
  }

  function devicesTable(
    c: ConsoleRequest,
    devices: readonly { id: string; name: string; realm: string; subject: string; createdAt: number }[],
    back: string,
    owners: Map<string, string> | null,
  ): SafeHtml {
    const withOwner = owners !== null;
    if (devices.length === 0) return html`<p class="muted">No device.</p>`;
    return html`<div class="table-wrap"><table>
<thead><tr><th scope="col">Device</th>${withOwner && html`<th scope="col">User</th>`}<th scope="col">Realm</th><th scope="col">Enrolled</th><th scope="col"><span class="sr">Action</span></th></tr></thead>
<tbody>${devices.map(
      (d) => html`<tr><td>${d.name}<br><code class="muted" title="${d.id}">${shortId(d.id)}</code></td>
${withOwner && html`<td><a href="/console/users/${d.subject}">${owners?.get(d.subject) ?? d.subject}</a></td>`}
<td>${d.realm}</td><td class="when">${when(rfc3339(d.createdAt))}</td>
<td><form method="post" action="/console/devices/${d.id}/remove">${hidden(c)}<input type="hidden" name="back" value="${back}">
<button class="button danger" type="submit" aria-label="Remove device ${d.name}">Remove</button></form></td></tr>`,
    )}</tbody></table></div>`;
  }

  async function sessionsTable(
    c: ConsoleRequest,
    filter: { subject?: string; realm?: 'management' | 'application' },
    back: string,
    withOwner: boolean,
  ): Promise<SafeHtml> {
    const sessions = await deps.store.listActiveSessions({ now: deps.clock.now(), ...filter });
    if (sessions.length === 0) return html`<p class="muted">No active session.</p>`;
    const owners = withOwner ? await whoIs(sessions.map((s) => s.subject)) : null;
    return html`<div class="table-wrap"><table>
<thead><tr>${withOwner && html`<th scope="col">User</th>`}<th scope="col">Session</th><th scope="col">Client</th><th scope="col">Started</th><th scope="col"><span class="sr">Action</span></th></tr></thead>
<tbody>${sessions.map(
      (s) => html`<tr>
${withOwner && html`<td><a href="/console/users/${s.subject}">${owners?.get(s.subject) ?? s.subject}</a><br><span class="muted">${s.realm}</span></td>`}
<td>${s.amr.join(', ')}${s.id === c.principal.session ? html` <strong>(this console)</strong>` : ''}<br><code class="muted" title="${s.id}">${shortId(s.id)}</code></td>
<td>${s.clientAddress ?? '—'}${s.userAgent !== null && html`<br><span class="muted">${shortAgent(s.userAgent)}</span>`}</td>
<td class="when">${when(rfc3339(s.createdAt))}</td>
<td><form method="post" action="/console/sessions/${s.id}/revoke">${hidden(c)}<input type="hidden" name="back" value="${back}">
<button class="button danger" type="submit" aria-label="Revoke session ${s.id}">Revoke</button></form></td></tr>`,
    )}</tbody></table></div>`;
  }

  function linksTable(c: ConsoleRequest, links: readonly LinkJson[], back: string, owners: Map<string, string> | null): SafeHtml {
    if (links.length === 0) return html`<p class="muted">No linked sign-in (passkey or company login).</p>`;
    const withOwner = owners !== null;
    return html`<div class="table-wrap"><table>
<thead><tr><th scope="col">Sign-in</th>${withOwner && html`<th scope="col">User</th>`}<th scope="col">Provider</th><th scope="col">Linked</th><th scope="col">Last used</th><th scope="col"><span class="sr">Action</span></th></tr></thead>
<tbody>${links.map(
      (l) => html`<tr><td>${l.name}<br><code class="muted" title="${l.id}">${shortId(l.id)}</code></td>
${withOwner && html`<td><a href="/console/users/${l.subject}">${owners?.get(l.subject) ?? l.subject}</a><br><span class="muted">${l.realm}</span></td>`}
<td>${l.provider}</td><td class="when">${when(l.created_at)}</td><td class="when">${when(l.last_used_at)}</td>
<td><form method="post" action="/console/links/${l.id}/remove">${hidden(c)}<input type="hidden" name="back" value="${back}">
<button class="button danger" type="submit" aria-label="Remove linked sign-in ${l.name}">Remove</button></form></td></tr>`,
    )}</tbody></table></div>`;
  }

  /** The user page's pairing forms: a device for this user, and a link intent (the recovery path for a lost passkey). */
  function userPairing(c: ConsoleRequest, u: UserJson): SafeHtml {
    const providers = (options.providers ?? []).filter((p) => p.realms.includes(u.realm));
    return html`<p class="muted">A one-time code for this user, shown once: for a new device, or to link a new sign-in when they lost theirs (a new passkey after a lost one).</p>
<h3>A new device</h3>
<form method="post" action="/console/pairing/device">
  ${hidden(c)}<input type="hidden" name="realm" value="${u.realm}"><input type="hidden" name="subject" value="${u.subject}">
  <label for="u-key">A new device's public key <span class="muted">(64 hex digits, from <code>svc auth keygen</code>)</span></label>
  <input type="text" id="u-key" name="public_key" required autocomplete="off" spellcheck="false">
  <label for="u-dname">Device name <span class="muted">(optional)</span></label><input type="text" id="u-dname" name="name" autocomplete="off">
  <div class="actions"><button class="button" type="submit">Prepare device code</button></div>
</form>
${
  providers.length === 0
    ? html`<p class="muted">No provider of the ${u.realm} realm can link a sign-in (a passkey or company login provider).</p>`
    : html`<h3>A new passkey or company sign-in</h3>
<form method="post" action="/console/pairing/link">
  ${hidden(c)}<input type="hidden" name="realm" value="${u.realm}"><input type="hidden" name="subject" value="${u.subject}">
  <label for="u-provider">Link a new sign-in with</label><select id="u-provider" name="provider">${providers.map((p) => html`<option value="${p.name}">${p.name}</option>`)}</select>
  <div class="actions"><button class="button" type="submit">Prepare link code</button></div>
</form>`
}`;
  }

  app.get<{ Params: { subject: string }; Querystring: { done?: string } }>('/console/users/:subject', async (req, reply) => {
    const c = await signedIn(req, reply);
    if (c === null) return reply;
    const u = await getUser(deps, { subject: req.params.subject });
    const back = `/console/users/${u.subject}`;
    const devices = devicesTable(c, await deps.store.listDevices({ subject: u.subject }), back, null);
    const sessions = await sessionsTable(c, { subject: u.subject }, back, false);
    const links = linksTable(c, await listLinks(deps, { principal: c.principal, subject: u.subject }), back, null);
    return page(
      reply,
      c,
      u.name ?? u.email ?? u.subject,
      '/console/users',
      userPageOf(c, u, { devices, sessions, links, pairing: userPairing(c, u) }, req.query.done),
    );
  });

  // Removing a user is confirmed on a page of its own, which says what goes with them.
  app.get<{ Params: { subject: string } }>('/console/users/:subject/remove', async (req, reply) => {
    const c = await signedIn(req, reply);
    if (c === null) return reply;
    const u = await getUser(deps, { subject: req.params.subject });
    const devices = await deps.store.listDevices({ subject: u.subject });
    const sessions = await deps.store.listActiveSessions({ now: deps.clock.now(), subject: u.subject });
    const links = await listLinks(deps, { principal: c.principal, subject: u.subject });
    const who = u.name ?? u.email ?? u.subject;
    const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;
    return page(
      reply,
      c,
      `Remove ${who}?`,
      '/console/users',
      html`<p class="error" role="alert">Removing <strong>${who}</strong> (<code>${u.subject}</code>, ${u.realm} realm) cannot be undone.</p>
<p>With them go ${count(devices.length, 'device', 'devices')} and ${count(links.length, 'linked sign-in', 'linked sign-ins')}, and ${count(sessions.length, 'active session is', 'active sessions are')} revoked at once.</p>
<form method="post" action="/console/users/${u.subject}/remove">
  ${hidden(c)}<input type="hidden" name="confirm" value="yes">
  <div class="actions"><button class="button danger" type="submit">Remove ${who}</button> <a class="button" href="/console/users/${u.subject}">Keep them</a></div>
</form>`,
    );
  });

  for (const [action, status, done] of [
    ['disable', 'disabled', 'disabled'],
    ['enable', 'active', 'enabled'],
  ] as const) {
    app.post<{ Params: { subject: string } }>(`/console/users/:subject/${action}`, async (req, reply) => {
      const r = await changing(req, reply);
      if (r === null) return reply;
      const { user } = await updateUserCounting(deps, {
        subject: req.params.subject,
        attributes: { status },
        actor: actorOf(r.c.principal),
        source: 'operator',
      });
      return reply.code(303).header('location', `/console/users/${user.subject}?done=${done}`).send();
    });
  }

  const groupsOf = (text: string | undefined) =>
    (text ?? '')
      .split(',')
      .map((g) => g.trim())
      .filter((g) => g !== '');

  app.post('/console/users/new', async (req, reply) => {
    const r = await changing(req, reply);
    if (r === null) return reply;
    const name = (r.form.name ?? '').trim();
    const email = (r.form.email ?? '').trim();
    const groups = groupsOf(r.form.groups);
    const user = await addUser(deps, {
      realm: r.form.realm,
      attributes: { ...(name === '' ? {} : { name }), ...(email === '' ? {} : { email }), ...(groups.length === 0 ? {} : { groups }) },
      actor: actorOf(r.c.principal),
      source: 'operator',
    });
    return reply.code(303).header('location', `/console/users/${user.subject}?done=added`).send();
  });

  app.post<{ Params: { subject: string } }>('/console/users/:subject/remove', async (req, reply) => {
    const r = await changing(req, reply);
    if (r === null) return reply;
    // Not confirmed (a form without the confirmation page's field): the confirmation page.
    if (r.form.confirm !== 'yes') {
      return reply
        .code(303)
        .header('location', `/console/users/${encodeURIComponent(req.params.subject)}/remove`)
        .send();
    }
    await removeUser(deps, { subject: req.params.subject, actor: actorOf(r.c.principal) });
    return reply.code(303).header('location', '/console/users?done=user_removed').send();
  });

  app.post<{ Params: { subject: string } }>('/console/users/:subject/edit', async (req, reply) => {
    const r = await changing(req, reply);
    if (r === null) return reply;
    const current = await getUser(deps, { subject: req.params.subject });
    const name = (r.form.name ?? '').trim();
    const email = (r.form.email ?? '').trim();
    const groups = (r.form.groups ?? '')
      .split(',')
      .map((g) => g.trim())
      .filter((g) => g !== '');
    // Only what changed: a field left as it was keeps its source (a provider's stays the provider's).
    const attributes: Record<string, unknown> = {};
    if ((current.name ?? '') !== name) attributes.name = name === '' ? null : name;
    if ((current.email ?? '') !== email) attributes.email = email === '' ? null : email;
    if (current.groups.join(',') !== groups.join(',')) attributes.groups = groups;
    if (Object.keys(attributes).length > 0) {
      await updateUserCounting(deps, { subject: current.subject, attributes, actor: actorOf(r.c.principal), source: 'operator' });
    }
    return reply.code(303).header('location', `/console/users/${current.subject}?done=saved`).send();
  });

  // ---- groups ----

  /** Who gave a user their groups, as a person reads it. */
  const sourceLabel = (s: string): string =>
    s === 'operator'
      ? 'operator'
      : s === 'scim'
        ? 'company directory (SCIM)'
        : s.startsWith('provider:')
          ? `sign-in provider ${s.slice(9)}`
          : s;

  const GROUP_MEMBERS_SHOWN = 20;

  app.get<{ Querystring: { realm?: string } }>('/console/groups', async (req, reply) => {
    const c = await signedIn(req, reply);
    if (c === null) return reply;
    const realm = req.query.realm === 'management' || req.query.realm === 'application' ? req.query.realm : undefined;
    const groups = [...(await listGroups(deps, realm === undefined ? {} : { realm }))].sort((a, b) =>
      a.realm === b.realm ? (a.name < b.name ? -1 : 1) : a.realm < b.realm ? -1 : 1,
    );
    const rows: SafeHtml[] = [];
    for (const g of groups) {
      const { users, next } = await listUsers(deps, { realm: g.realm, group: g.name, limit: GROUP_MEMBERS_SHOWN });
      // The group's source: the directory's own group record, and whoever gave its members their groups.
      const sources = new Set<string>();
      if (g.id !== null) sources.add('company directory (SCIM)');
      for (const u of users) if (u.sources.groups !== null) sources.add(sourceLabel(u.sources.groups));
      const all = `/console/users?${new URLSearchParams({ group: g.name, realm: g.realm }).toString()}`;
      rows.push(html`<tr><td><strong>${g.name}</strong>${g.id !== null && html`<br><code class="muted" title="${g.id}">${shortId(g.id)}</code>`}</td>
<td>${g.realm}</td><td>${sources.size === 0 ? '—' : [...sources].join(', ')}</td>
<td>${
        users.length === 0
          ? html`<span class="muted">No member yet.</span>`
          : html`<ul class="plain">${users.map(
              (u) =>
                html`<li><a href="/console/users/${u.subject}">${u.name ?? u.email ?? shortId(u.subject)}</a>${u.status === 'disabled' ? html` <strong class="bad">(disabled)</strong>` : ''}</li>`,
            )}</ul>`
      }${next !== null ? html`<a href="${all}">All ${g.members} members</a>` : users.length > 0 ? html`<a class="muted" href="${all}">As a list</a>` : ''}</td></tr>`);
    }
    const option = (value: string, label: string) =>
      html`<option value="${value}"${(realm ?? '') === value ? html` selected` : ''}>${label}</option>`;
    const main = html`<p class="muted">A user's groups are edited on the user's page. A group comes from an operator, the company directory (SCIM) or a sign-in provider; what a provider or the directory set stays theirs until an operator changes it.</p>
<form method="get" action="/console/groups" class="filters">
  <div class="field"><label for="g-realm">Realm</label>
  <select id="g-realm" name="realm">${option('', 'Both')}${option('application', 'Application')}${option('management', 'Management')}</select></div>
  <div class="actions"><button class="button primary" type="submit">Filter</button></div>
</form>
${
  groups.length === 0
    ? html`<p class="notice">No group yet. Give a user groups on their page, or let the company directory or a sign-in provider send them.</p>`
    : html`<div class="table-wrap"><table>
<caption class="muted">${groups.length} group${groups.length === 1 ? '' : 's'}</caption>
<thead><tr><th scope="col">Group</th><th scope="col">Realm</th><th scope="col">Source</th><th scope="col">Members</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
}`;
    return page(reply, c, 'Groups', '/console/groups', main);
  });

  // ---- sessions and devices ----

  const backTo = (form: Form, fallback: string, done: string): string => {
    const b = form.back ?? '';
    const path = /^\/console\/[\w/-]*$/.test(b) ? b : fallback;
    return `${path}?done=${done}`;
  };

  app.get<{ Querystring: { done?: string; realm?: string } }>('/console/sessions', async (req, reply) => {
    const c = await signedIn(req, reply);
    if (c === null) return reply;
    const done = req.query.done;
    const realm = req.query.realm === 'management' || req.query.realm === 'application' ? req.query.realm : undefined;
    const only: { realm?: 'management' | 'application' } = realm === undefined ? {} : { realm };
    const allDevices = await deps.store.listDevices(only);
    const links = await listLinks(deps, { principal: c.principal, ...only });
    const option = (value: string, label: string) =>
      html`<option value="${value}"${(realm ?? '') === value ? html` selected` : ''}>${label}</option>`;
    const main = html`${done !== undefined && DONE[done] !== undefined && html`<p class="notice" role="status">${DONE[done]}</p>`}
<form method="get" action="/console/sessions" class="filters">
  <div class="field"><label for="s-realm">Realm</label>
  <select id="s-realm" name="realm">${option('', 'Both')}${option('application', 'Application')}${option('management', 'Management')}</select></div>
  <div class="actions"><button class="button primary" type="submit">Filter</button></div>
</form>
<h2>Active sessions</h2>${await sessionsTable(c, only, '/console/sessions', true)}
<h2>Devices</h2>${devicesTable(c, allDevices, '/console/sessions', await whoIs(allDevices.map((d) => d.subject)))}
<h2>Linked sign-ins</h2>${linksTable(c, links, '/console/sessions', await whoIs(links.map((l) => l.subject)))}`;
    return page(reply, c, 'Sessions & devices', '/console/sessions', main);
  });

  app.post<{ Params: { id: string } }>('/console/links/:id/remove', async (req, reply) => {
    const r = await changing(req, reply);
    if (r === null) return reply;
    await unlinkIdentity(deps, { principal: r.c.principal, linkId: req.params.id });
    return reply
      .code(303)
      .header('location', backTo(r.form, '/console/sessions', 'unlinked'))
      .send();
  });

  app.post<{ Params: { id: string } }>('/console/sessions/:id/revoke', async (req, reply) => {
    const r = await changing(req, reply);
    if (r === null) return reply;
    await revokeSession(deps, { principal: r.c.principal, sessionId: req.params.id });
    if (req.params.id === r.c.principal.session) clearConsoleCookies(reply);
    return reply
      .code(303)
      .header('location', backTo(r.form, '/console/sessions', 'revoked'))
      .send();
  });

  app.post<{ Params: { id: string } }>('/console/devices/:id/remove', async (req, reply) => {
    const r = await changing(req, reply);
    if (r === null) return reply;
    await removeDevice(deps, { principal: r.c.principal, deviceId: req.params.id });
    return reply
      .code(303)
      .header('location', backTo(r.form, '/console/sessions', 'removed'))
      .send();
  });

  // ---- audit ----

  const AUDIT_PAGE = 50;
  const AUDIT_SCAN_MAX = 5000;

  function matches(e: AuditEvent, type: string | undefined, subject: string | undefined): boolean {
    return (type === undefined || e.type === type || e.type.startsWith(`${type}.`)) && (subject === undefined || e.subject === subject);
  }

  /** Newest first, before `before` (a seq), scanning back at most {@link AUDIT_SCAN_MAX} events. */
  async function auditPage(type: string | undefined, subject: string | undefined, before: number | undefined) {
    const head = await deps.store.auditHead();
    const found: AuditEvent[] = [];
    let end = Math.min(before ?? Number.MAX_SAFE_INTEGER, (head?.seq ?? 0) + 1);
    const latest = head?.seq ?? 0;
    let scanned = 0;
    while (end > 1 && found.length < AUDIT_PAGE && scanned < AUDIT_SCAN_MAX) {
      const from = Math.max(0, end - 1 - 500);
      const chunk = await deps.store.listAuditEvents({ afterSeq: from, limit: end - 1 - from });
      scanned += chunk.length;
      for (let i = chunk.length - 1; i >= 0 && found.length < AUDIT_PAGE; i--) {
        const e = chunk[i] as AuditEvent;
        if (e.seq < end && matches(e, type, subject)) found.push(e);
      }
      end = from + 1;
      if (chunk.length === 0) break;
    }
    const last = found.at(-1);
    return { events: found, older: found.length === AUDIT_PAGE && last !== undefined && last.seq > 1 ? last.seq : null, latest };
  }

  const auditRow = (e: AuditEvent) => {
    const j = auditEventToJson(e);
    const data = Object.entries(j.data)
      .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
      .join(' ');
    return html`<tr><td>${j.seq}</td><td class="when">${when(j.at)}</td><td><code class="type">${j.type}</code>${j.subject !== null && html`<br><a href="/console/users/${j.subject}">${shortId(j.subject)}</a>`}</td><td class="details muted">${data}</td></tr>`;
  };

  app.get<{ Querystring: Record<string, string | undefined> }>('/console/audit', async (req, reply) => {
    const c = await signedIn(req, reply);
    if (c === null) return reply;
    const type = req.query.type?.trim() || undefined;
    const subject = req.query.subject?.trim() || undefined;
    const before = req.query.before !== undefined && /^\d{1,15}$/.test(req.query.before) ? Number(req.query.before) : undefined;
    const p = await auditPage(type, subject, before);
    const older =
      p.older === null
        ? null
        : new URLSearchParams({ ...(type ? { type } : {}), ...(subject ? { subject } : {}), before: String(p.older) });
    const main = html`
<form method="get" action="/console/audit" class="filters">
  <div class="field"><label for="a-type">Event type <span class="muted">(e.g. <code>session</code>, <code>user.disabled</code>)</span></label>
  <input type="text" id="a-type" name="type" value="${type ?? ''}"></div>
  <div class="field"><label for="a-subject">Subject</label>
  <input type="text" id="a-subject" name="subject" value="${subject ?? ''}" placeholder="sub_..."></div>
  <div class="actions"><button class="button primary" type="submit">Filter</button> <a class="button" href="/console/audit">Clear</a></div>
</form>
${
  before === undefined &&
  html`<div class="actions"><button class="button" type="button" id="follow" aria-pressed="false">Follow live</button>
<a class="button" href="/console/audit/verify">Verify the chain and checkpoints</a>
<span id="live-status" class="muted" role="status" aria-live="polite"></span></div>`
}
<div class="table-wrap"><table class="audit">
<caption class="muted">Newest first</caption>
<thead><tr><th scope="col">#</th><th scope="col">When</th><th scope="col">Event and subject</th><th scope="col">Details</th></tr></thead>
<tbody id="events">${p.events.map(auditRow)}</tbody></table></div>
${p.events.length === 0 && html`<p class="notice">No event matches.</p>`}
${older !== null && html`<p><a class="button" href="/console/audit?${older.toString()}">Older events</a></p>`}`;
    return page(reply, c, 'Audit trail', '/console/audit', main, {
      script: FOLLOW_SCRIPT,
      data: { latest: String(p.latest), type: type ?? '', subject: subject ?? '' },
    });
  });

  app.get<{ Querystring: Record<string, string | undefined> }>('/console/audit/events', async (req, reply) => {
    const c = await signedIn(req, reply);
    if (c === null) return reply;
    const after = req.query.after !== undefined && /^\d{1,15}$/.test(req.query.after) ? Number(req.query.after) : 0;
    const type = req.query.type?.trim() || undefined;
    const subject = req.query.subject?.trim() || undefined;
    const events = await deps.store.listAuditEvents({ afterSeq: after, limit: 200 });
    const last = events.at(-1);
    return reply.header('cache-control', 'no-store').send({
      events: events.filter((e) => matches(e, type, subject)).map(auditEventToJson),
      latest: last === undefined ? after : last.seq,
    });
  });

  const CHECKPOINTS_SHOWN = 20;

  const checkpointProblem: Readonly<Record<string, string>> = {
    malformed: 'not a signed checkpoint',
    bad_signature: 'the signature does not verify',
    other_key: 'not signed by this node’s key (nor a previous one in its window)',
    other_project: 'about another project',
    truncated: 'the chain lost events since',
    rewritten: 'the chain was rewritten since',
  };

  // The chain verified link by link (as `svc auth audit verify`) and the exported signed
  // checkpoints, each checked against it and the node key history (as `--checkpoints FILE`).
  app.get('/console/audit/verify', async (req, reply) => {
    const c = await signedIn(req, reply);
    if (c === null) return reply;
    const verdict = options.verifyAudit === undefined ? null : await options.verifyAudit();
    const review = options.auditCheckpoints === undefined ? null : await options.auditCheckpoints(CHECKPOINTS_SHOWN);
    const main = html`<p><a href="/console/audit">Back to the audit trail</a></p>
<h2>Hash chain</h2>
${
  verdict === null
    ? html`<p class="muted">This listener cannot read the whole chain: run <code>svc auth audit verify</code>.</p>`
    : verdict.ok
      ? html`<p class="notice" role="status" id="chain-verdict">The hash chain is intact: ${verdict.events} events, each linked to the one before, head <code>${verdict.head.slice(0, 16)}…</code>.</p>`
      : html`<p class="error" role="alert" id="chain-verdict">The hash chain is broken${verdict.seq === null ? '' : ` at event #${verdict.seq}`}: ${verdict.problem}. Run <code>svc auth audit verify</code> and restore the control database from a backup.</p>`
}
<h2>Signed checkpoints</h2>
${
  review === null || !review.exported
    ? html`<p class="muted">This service exports no checkpoints. Set <code>SVC_AUDIT_CHECKPOINT_FILE</code> to a file outside the control directory: the running service then appends a checkpoint of the chain head, signed by the node key, at start, every 5 minutes when it moved, and at stop.</p>`
    : review.total === 0
      ? html`<p class="muted">No checkpoint exported yet.</p>`
      : html`${
          review.failed === 0
            ? html`<p class="notice" role="status" id="checkpoints-verdict">${review.total === 1 ? 'The exported checkpoint verifies' : `All ${review.total} exported checkpoints verify`} against the node key history and ${review.total === 1 ? 'matches' : 'match'} the chain: no event was removed or rewritten since ${review.total === 1 ? 'it was' : 'they were'} signed.</p>`
            : html`<p class="error" role="alert" id="checkpoints-verdict">${review.failed} of ${review.total} exported checkpoints fail: events were removed or the chain was rewritten, or a checkpoint is not this node’s. Run <code>svc auth audit verify --checkpoints FILE</code> and restore the control database from a backup.</p>`
        }
<div class="table-wrap"><table>
<caption class="muted">The latest ${review.checkpoints.length} of ${review.total}, newest first</caption>
<thead><tr><th scope="col">Signed</th><th scope="col">Chain</th><th scope="col">Head</th><th scope="col">Signing node</th><th scope="col">Verdict</th></tr></thead>
<tbody>${review.checkpoints.map(
          (
            k,
          ) => html`<tr><td class="when">${k.at === null ? '—' : when(k.at)}</td><td>${k.length === null ? '—' : `${k.length} event${k.length === 1 ? '' : 's'}`}</td>
<td>${k.head === null ? '—' : html`<code title="${k.head}">${k.head.slice(0, 16)}…</code>`}</td>
<td>${k.node_id === null ? '—' : html`<span class="sr">Signed by node </span><code>${k.node_id}</code>`}</td>
<td>${k.ok ? html`<strong class="good">Verified</strong>` : html`<strong class="bad">Fails</strong>: ${checkpointProblem[k.problem ?? ''] ?? k.problem}<br><span class="muted">${k.detail}</span>`}</td></tr>`,
        )}</tbody></table></div>`
}`;
    return page(reply, c, 'Audit verification', '/console/audit', main);
  });

  // ---- pairing ----

  const realmSelect = (id: string) =>
    html`<label for="${id}">Realm</label><select id="${id}" name="realm"><option value="application" selected>Application (people and apps)</option><option value="management">Management (operators)</option></select>`;

  app.get('/console/pairing', async (req, reply) => {
    const c = await signedIn(req, reply);
    if (c === null) return reply;
    const providers = options.providers ?? [];
    const main = html`
<p>Prepare a one-time code for a new device (it proves itself with its own key) or for a sign-in to link (a passkey, a company login). The code is shown once.</p>
<h2>A device</h2>
<form method="post" action="/console/pairing/device">
  ${hidden(c)}
  ${realmSelect('d-realm')}
  <label for="d-key">The device's public key <span class="muted">(64 hex digits, from <code>svc auth keygen</code>)</span></label>
  <input type="text" id="d-key" name="public_key" required autocomplete="off" spellcheck="false">
  <label for="d-name">Device name <span class="muted">(optional)</span></label><input type="text" id="d-name" name="name" autocomplete="off">
  <label for="d-subject">For an existing user <span class="muted">(optional, sub_...; empty: a new user)</span></label><input type="text" id="d-subject" name="subject" autocomplete="off">
  <div class="actions"><button class="button primary" type="submit">Prepare device code</button></div>
</form>
<h2>A linked sign-in</h2>
${
  providers.length === 0
    ? html`<p class="muted">This node runs no provider that can link a sign-in (a passkey or company login provider).</p>`
    : html`<form method="post" action="/console/pairing/link">
  ${hidden(c)}
  ${realmSelect('l-realm')}
  <label for="l-provider">Provider</label><select id="l-provider" name="provider">${providers.map((p) => html`<option value="${p.name}">${p.name}</option>`)}</select>
  <label for="l-subject">For an existing user <span class="muted">(optional, sub_...; empty: an invitation for a new user)</span></label><input type="text" id="l-subject" name="subject" autocomplete="off">
  <label for="l-name">Name <span class="muted">(optional)</span></label><input type="text" id="l-name" name="name" autocomplete="off">
  <div class="actions"><button class="button primary" type="submit">Prepare link code</button></div>
</form>`
}`;
    return page(reply, c, 'Pairing', '/console/pairing', main);
  });

  const pairingResult = (
    reply: FastifyReply,
    c: ConsoleRequest,
    p: { intent_id: string; code: string; realm: string; subject: string; expires_at: string },
    how: SafeHtml,
  ) =>
    page(
      reply,
      c,
      'Pairing code ready',
      '/console/pairing',
      html`<p class="notice" role="status">Give this code to the person it is for. It is shown only now and works once, until ${when(p.expires_at)}.</p>
<p class="code-big"><code>${p.code}</code></p>
<dl class="facts"><dt>Intent</dt><dd><code>${p.intent_id}</code></dd><dt>Realm</dt><dd>${p.realm}</dd><dt>User</dt><dd><a href="/console/users/${p.subject}">${p.subject}</a></dd></dl>
${how}
<p><a class="button" href="/console/pairing">Prepare another</a></p>`,
      { status: 201 },
    );

  const optional = (v: string | undefined) => (v === undefined || v.trim() === '' ? undefined : v.trim());

  app.post('/console/pairing/device', async (req, reply) => {
    const r = await changing(req, reply);
    if (r === null) return reply;
    const p = await preparePairing(deps, {
      principal: r.c.principal,
      realm: r.form.realm,
      publicKey: (r.form.public_key ?? '').trim(),
      subject: optional(r.form.subject),
      name: optional(r.form.name),
    });
    return pairingResult(
      reply,
      r.c,
      p,
      html`<p>On the new device: <code>svc auth pair complete --intent ${p.intent_id} --code - --key DEVICE_KEY.pem</code>, then type the code.</p>`,
    );
  });

  app.post('/console/pairing/link', async (req, reply) => {
    const r = await changing(req, reply);
    if (r === null) return reply;
    const p = await prepareLinkPairing(deps, {
      principal: r.c.principal,
      realm: r.form.realm,
      provider: r.form.provider,
      providers: options.providers ?? [],
      subject: optional(r.form.subject),
      name: optional(r.form.name),
    });
    return pairingResult(
      reply,
      r.c,
      p,
      html`<p>Send them the application's sign-in page with this intent: <code>/.svc/auth/v1/login?pairing=${p.intent_id}</code> on the application's address (the code never goes in the link). They type the code there and create their ${p.provider} sign-in; it is linked to this user.</p>`,
    );
  });

  // ---- status ----

  app.get('/console/status', async (req, reply) => {
    const c = await signedIn(req, reply);
    if (c === null) return reply;
    const head = await deps.store.auditHead();
    const active = await deps.store.listActiveSessions({ now: deps.clock.now() });
    const status = (options.status === undefined ? null : await options.status()) as StatusView | null;
    const main = html`
<dl class="facts">
  <dt>Project</dt><dd><code>${deps.projectId}</code></dd>
  <dt>Checked</dt><dd>${when(rfc3339(deps.clock.now()))}</dd>
  <dt>Store</dt><dd>reachable${status?.store_addon != null && html` (${status.store_addon.package ?? ''} ${status.store_addon.version ?? ''})`}</dd>
  <dt>Audit trail</dt><dd>${head === null ? 'empty' : html`${head.seq} events, head <code>${head.hash.slice(0, 16)}…</code>`}</dd>
  <dt>Active sessions</dt><dd>${active.length}</dd>
  ${status?.service !== undefined && html`<dt>Service</dt><dd>${status.service.name ?? ''} ${status.service.version ?? ''}</dd>`}
</dl>
<h2>Providers</h2>
${
  status === null
    ? html`<p class="muted">This listener runs without the node surface: providers are shown by <code>svc serve</code>.</p>`
    : (status.providers ?? []).length === 0
      ? html`<p class="muted">No provider.</p>`
      : html`<div class="table-wrap"><table><thead><tr><th scope="col">Provider</th><th scope="col">Kind</th><th scope="col">Package</th><th scope="col">Health</th></tr></thead>
<tbody>${(status.providers ?? []).map(
          (
            p,
          ) => html`<tr><td>${p.name}</td><td>${p.kind ?? ''}</td><td>${p.package === undefined ? 'built in' : html`${p.package} ${p.version ?? ''} <span class="muted">(signature ${p.verification ?? ''})</span>`}</td>
<td>${p.health ?? 'running'}</td></tr>`,
        )}</tbody></table></div>`
}
${
  status !== null &&
  html`<h2>Applications behind the gateway</h2>
${
  (status.routes ?? []).length === 0
    ? html`<p class="muted">No application: neither <code>:svc/app-routes</code> nor <code>:svc/app-upstream</code> is set.</p>`
    : html`<div class="table-wrap"><table><thead><tr><th scope="col">From</th><th scope="col">To</th><th scope="col">Public paths</th><th scope="col">Requires</th><th scope="col">Audience</th><th scope="col">Upstream</th></tr></thead>
<tbody>${(status.routes ?? []).map(
        (
          r,
        ) => html`<tr><td><code>${r.from}</code></td><td><code>${r.to}</code></td><td>${r.public.length === 0 ? html`<span class="muted">none</span>` : r.public.join(' ')}</td><td>${r.requires}</td><td>${r.audience}</td>
<td>${r.health.startsWith('reachable') ? r.health : html`<strong class="bad">${r.health}</strong>`}</td></tr>`,
      )}</tbody></table></div>`
}`
}`;
    return page(reply, c, 'Status', '/console/status', main);
  });
};

interface StatusView {
  node_id?: string;
  service?: { name?: string; version?: string };
  store_addon?: { package?: string; version?: string } | null;
  providers?: { name: string; kind?: string; package?: string; version?: string; verification?: string; health?: string }[];
  /** The applications behind the gateway, each upstream's bounded probe (`reachable (N ms)` or `unreachable: ...`). */
  routes?: { from: string; to: string; public: string[]; requires: string; audience: string; health: string }[];
}

// "Follow live": polls the console's own JSON every 2 s and puts new rows on top, built with
// textContent (nothing the events hold is ever parsed as markup).
const FOLLOW_SCRIPT = `
(function () {
  var button = document.getElementById('follow');
  if (!button) return;
  var status = document.getElementById('live-status');
  var body = document.getElementById('events');
  var d = document.body.dataset;
  var latest = Number(d.latest || 0);
  var timer = null;
  function cell(row, text, cls) { var td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; row.appendChild(td); return td; }
  function when(iso) { return iso.replace('T', ' ').replace(/\\.\\d+Z$/, ' UTC'); }
  function add(e) {
    var row = document.createElement('tr');
    cell(row, String(e.seq));
    cell(row, when(e.at), 'when');
    var t = document.createElement('td');
    var code = document.createElement('code'); code.className = 'type'; code.textContent = e.type; t.appendChild(code);
    if (e.subject) { t.appendChild(document.createElement('br')); var a = document.createElement('a'); a.href = '/console/users/' + encodeURIComponent(e.subject); a.textContent = e.subject.length > 18 ? e.subject.slice(0, 10) + '\\u2026' + e.subject.slice(-6) : e.subject; t.appendChild(a); }
    row.appendChild(t);
    cell(row, Object.keys(e.data).map(function (k) { var v = e.data[k]; return k + '=' + (typeof v === 'string' ? v : JSON.stringify(v)); }).join(' '), 'details muted');
    row.className = 'fresh';
    body.insertBefore(row, body.firstChild);
  }
  function poll() {
    var q = new URLSearchParams({ after: String(latest), type: d.type || '', subject: d.subject || '' });
    fetch('/console/audit/events?' + q.toString(), { credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.json(); })
      .then(function (j) { j.events.forEach(add); latest = j.latest; status.textContent = 'Following: updated ' + new Date().toLocaleTimeString(); })
      .catch(function () { status.textContent = 'Following paused: the console could not be reached or you were signed out. Reload the page.'; stop(); });
  }
  function stop() { if (timer) clearInterval(timer); timer = null; button.textContent = 'Follow live'; button.setAttribute('aria-pressed', 'false'); }
  button.addEventListener('click', function () {
    if (timer) { stop(); status.textContent = 'Stopped following.'; return; }
    button.textContent = 'Stop following'; button.setAttribute('aria-pressed', 'true');
    status.textContent = 'Following: new events appear at the top.';
    poll(); timer = setInterval(poll, 2000);
  });
})();
`;

/** Registers the console on the management app (see {@link consoleRoutes}). */
export async function registerConsole(app: FastifyInstance, deps: AuthDeps, options: ConsoleOptions = {}): Promise<void> {
  await app.register(consoleRoutes, { deps, console: options });
}
