import type { Realm } from './realm.js';

// The sender-constraint policy is a setting (`:auth/sender-constraint`) that the settings table,
// the validator and the DPoP checks all read; it has its own module so the settings table does
// not import the DPoP code (which imports the settings' limits).

/** How a realm binds the sessions its device keys sign in (`:auth/sender-constraint`). */
export type SenderConstraint = 'refresh' | 'required' | 'off';

/** The values of {@link SenderConstraint}, the default first. */
export const SENDER_CONSTRAINTS: readonly SenderConstraint[] = Object.freeze(['refresh', 'required', 'off']);

/** The sender constraint of each realm (see {@link SenderConstraint}). */
export type SenderConstraints = Readonly<Record<Realm, SenderConstraint>>;
