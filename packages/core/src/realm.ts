/** The two realms every profile declares. `management` is always protected. */
export const REALMS = ['management', 'application'] as const;

/** A realm name. */
export type Realm = (typeof REALMS)[number];

/** Whether `value` names a realm. */
export function isRealm(value: unknown): value is Realm {
  return value === 'management' || value === 'application';
}
