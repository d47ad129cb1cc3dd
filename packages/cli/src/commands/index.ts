// The settings table alone: `svc --help` must not pay for loading all of core.
import { BOOTSTRAP_TOKEN_TTL_SECONDS, formatLimit } from '@svc/core/settings';
import type { Command } from '../command.js';

/**
 * One entry of `svc`'s command table: its words, the summary `svc --help` lists, and how to
 * load it. Modules load only when their command runs, so `svc --help` and short commands do
 * not pay for the server, the stores and their drivers.
 */
export interface CommandEntry {
  readonly path: readonly string[];
  readonly summary: string;
  readonly load: () => Promise<Command>;
}

/** Every command of `svc`, in the order `svc --help` lists them. */
export const COMMANDS: readonly CommandEntry[] = [
  {
    path: ['auth', 'init'],
    summary: `Create a project, its control database and node key, and print a one-time bootstrap token (valid ${formatLimit(BOOTSTRAP_TOKEN_TTL_SECONDS, 'seconds')}).`,
    load: async () => (await import('./auth-init.js')).authInit,
  },
  {
    path: ['auth', 'enroll'],
    summary: 'Enroll the first management device with the one-time bootstrap token (offline, on the project).',
    load: async () => (await import('./auth-enroll.js')).authEnroll,
  },
  {
    path: ['auth', 'serve'],
    summary: 'Run the loopback management API in the foreground.',
    load: async () => (await import('./auth-serve.js')).authServe,
  },
  {
    path: ['serve'],
    summary: 'Run the service in the foreground: the embedded management API, the node surface and the application gateway.',
    load: async () => (await import('./serve.js')).serve,
  },
  {
    path: ['app', 'serve'],
    summary: 'Run the application gateway alone in the foreground: application-realm sign-in, identity, then the application.',
    load: async () => (await import('./app-serve.js')).appServe,
  },
  {
    path: ['node', 'serve'],
    summary: 'Run the node HTTP surface alone in the foreground: discovery, health, status, signed diagnostics, pairing.',
    load: async () => (await import('./node-serve.js')).nodeServe,
  },
  {
    path: ['node', 'rotate-key'],
    summary: "Replace this node's identity key with a new one; discovery keeps publishing the old one with its validity window.",
    load: async () => (await import('./node-rotate-key.js')).nodeRotateKey,
  },
  {
    path: ['app', 'rotate-key'],
    summary: "Rotate the gateway's Svc-Assertion signing key: the new key is published first, the old one stays published for an overlap.",
    load: async () => (await import('./app-rotate-key.js')).appRotateKey,
  },
  {
    path: ['app', 'routes'],
    summary:
      'List the applications behind the gateway (:svc/app-routes, or the one :svc/app-upstream) with their policies, from project.edn.',
    load: async () => (await import('./app-routes.js')).appRoutes,
  },
  {
    path: ['auth', 'keygen'],
    summary: 'Generate an Ed25519 device key (PKCS#8 PEM, owner-only) and print its public key hex.',
    load: async () => (await import('./auth-keygen.js')).authKeygen,
  },
  {
    path: ['auth', 'pubkey'],
    summary: 'Print the public key hex of an Ed25519 device key file.',
    load: async () => (await import('./auth-pubkey.js')).authPubkey,
  },
  {
    path: ['auth', 'login'],
    summary: 'Sign in with an enrolled device key (challenge, signature, session) and save the credentials.',
    load: async () => (await import('./auth-login.js')).authLogin,
  },
  {
    path: ['auth', 'console'],
    summary: 'Print a one-time URL (single use, 60 s, loopback) that signs a browser on this machine in to the management console.',
    load: async () => (await import('./auth-console.js')).authConsole,
  },
  {
    path: ['auth', 'whoami'],
    summary: 'Show the principal of the saved session (refreshing the token pair when needed).',
    load: async () => (await import('./auth-whoami.js')).authWhoami,
  },
  {
    path: ['auth', 'refresh'],
    summary: 'Rotate the saved token pair with its single-use refresh token and save the new pair.',
    load: async () => (await import('./auth-refresh.js')).authRefresh,
  },
  {
    path: ['auth', 'logout'],
    summary: 'Revoke the saved session on the server and forget it (the file goes with its last context).',
    load: async () => (await import('./auth-logout.js')).authLogout,
  },
  {
    path: ['auth', 'contexts'],
    summary: 'List the saved sign-ins (one context per service URL and realm) and which one is current.',
    load: async () => (await import('./auth-contexts.js')).authContexts,
  },
  {
    path: ['auth', 'contexts', 'use'],
    summary: 'Make a saved sign-in (context) the current one, used when a command names no --context.',
    load: async () => (await import('./auth-contexts-use.js')).authContextsUse,
  },
  {
    path: ['auth', 'devices'],
    summary: 'List the enrolled devices: offline on a project, or over the management API with the saved session.',
    load: async () => (await import('./auth-devices.js')).authDevices,
  },
  {
    path: ['auth', 'devices', 'remove'],
    summary: 'Remove an enrolled device and revoke all its sessions (audited; refuses the last management device).',
    load: async () => (await import('./auth-devices-remove.js')).authDevicesRemove,
  },
  {
    path: ['auth', 'links'],
    summary: 'List the live links (passkeys, OIDC logins) of the subjects, offline on a project.',
    load: async () => (await import('./auth-links.js')).authLinks,
  },
  {
    path: ['auth', 'links', 'remove'],
    summary: 'Remove a link and revoke all the sessions it signed in (audited).',
    load: async () => (await import('./auth-links-remove.js')).authLinksRemove,
  },
  {
    path: ['auth', 'sessions'],
    summary: 'List the active sessions, newest first: offline on a project, or over the management API.',
    load: async () => (await import('./auth-sessions.js')).authSessions,
  },
  {
    path: ['auth', 'sessions', 'revoke'],
    summary: 'Revoke a session immediately (audited as revoked by the operator, or by the signed-in device over the API).',
    load: async () => (await import('./auth-sessions-revoke.js')).authSessionsRevoke,
  },
  {
    path: ['auth', 'users'],
    summary: 'List the users (who each subject is, its status and groups) over the management API, one page at a time.',
    load: async () => (await import('./auth-users.js')).authUsers,
  },
  {
    path: ['auth', 'users', 'show'],
    summary: 'Show one user: its attributes, where each came from, its status and last sign-in.',
    load: async () => (await import('./auth-users-show.js')).authUsersShow,
  },
  {
    path: ['auth', 'users', 'add'],
    summary: 'Add a user without a credential yet (then pair a device or link a login to it with `svc auth pair --subject`).',
    load: async () => (await import('./auth-users-add.js')).authUsersAdd,
  },
  {
    path: ['auth', 'users', 'set'],
    summary: "Change a user's name, email or groups (what you set stays yours: a sign-in provider no longer refreshes it).",
    load: async () => (await import('./auth-users-set.js')).authUsersSet,
  },
  {
    path: ['auth', 'users', 'disable'],
    summary:
      'Disable a user: refuse its sign-ins and revoke all its sessions at once, on every node (audited; refuses the last management user).',
    load: async () => (await import('./auth-users-disable.js')).authUsersDisable,
  },
  {
    path: ['auth', 'users', 'enable'],
    summary: 'Enable a disabled user: sign-in works again (its revoked sessions stay revoked).',
    load: async () => (await import('./auth-users-enable.js')).authUsersEnable,
  },
  {
    path: ['auth', 'users', 'remove'],
    summary: 'Remove a user with its devices and links, revoking its sessions (audited; refuses the last management user).',
    load: async () => (await import('./auth-users-remove.js')).authUsersRemove,
  },
  {
    path: ['auth', 'groups'],
    summary: 'List the groups of the users, with their member counts, over the management API.',
    load: async () => (await import('./auth-groups.js')).authGroups,
  },
  {
    path: ['auth', 'scim', 'token', 'create'],
    summary: "Create a SCIM token for a company directory's provisioning (printed once; only its digest is kept).",
    load: async () => (await import('./auth-scim-token-create.js')).authScimTokenCreate,
  },
  {
    path: ['auth', 'scim', 'token', 'list'],
    summary: 'List the SCIM tokens (never the tokens themselves), revoked ones included.',
    load: async () => (await import('./auth-scim-token-list.js')).authScimTokenList,
  },
  {
    path: ['auth', 'scim', 'token', 'revoke'],
    summary: "Revoke a SCIM token: the directory's next request with it is refused (audited).",
    load: async () => (await import('./auth-scim-token-revoke.js')).authScimTokenRevoke,
  },
  {
    path: ['auth', 'audit'],
    summary: 'Print the audit log, oldest first: offline on a project, or over the management API.',
    load: async () => (await import('./auth-audit.js')).authAudit,
  },
  {
    path: ['auth', 'audit', 'verify'],
    summary:
      'Check the audit hash chain (edited, removed, inserted or reordered events) and, against exported checkpoints, truncation and rewriting.',
    load: async () => (await import('./auth-audit-verify.js')).authAuditVerify,
  },
  {
    path: ['auth', 'backup'],
    summary:
      'Write a consistent copy of the control database to a new owner-only file signed by the node key, also while the service is serving.',
    load: async () => (await import('./auth-backup.js')).authBackup,
  },
  {
    path: ['auth', 'restore'],
    summary:
      'Put a backup back as the control database, with the service stopped (checks its signature, project, schema, audit chain and that the trail accounts for every device, link and session first).',
    load: async () => (await import('./auth-restore.js')).authRestore,
  },
  {
    path: ['auth', 'store', 'migrate'],
    summary:
      'Copy the whole control state into another, empty store module of project.edn (SQLite to PostgreSQL and back), with the service stopped: users, devices, passkeys, links, the audit chain (verified, continued with store.migrated), and with --sessions the live sessions.',
    load: async () => (await import('./auth-store-migrate.js')).authStoreMigrate,
  },
  {
    path: ['auth', 'pair'],
    summary:
      'Prepare a pairing (enrolment intent) for a new device, or a link intent for a passkey or company login, on the node surface; prints the one-time code.',
    load: async () => (await import('./auth-pair.js')).authPair,
  },
  {
    path: ['auth', 'pair', 'complete'],
    summary: 'Complete a pairing on the new device: prove possession of its key with the one-time code.',
    load: async () => (await import('./auth-pair-complete.js')).authPairComplete,
  },
  {
    path: ['package', 'install'],
    summary: 'Install an addon archive pinned by its SHA-256, keep the archive in the project, and record the pin in project.edn.',
    load: async () => (await import('./package-install.js')).packageInstall,
  },
  {
    path: ['package', 'sign'],
    summary: "Sign a provider package archive with a publisher's Ed25519 key: writes <ARCHIVE>.sig.",
    load: async () => (await import('./package-sign.js')).packageSign,
  },
];
