// Pairing intents cannot bring back a disabled admin or a removed user, on a SQLite store.
import { intentLifecycleAttacks } from '../support/intent-lifecycle-attacks.js';

intentLifecycleAttacks('sqlite');
