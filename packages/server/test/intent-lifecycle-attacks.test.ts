// Pairing intents cannot bring back a disabled admin or a removed user (memory store; the same
// attacks on SQLite: real/intent-lifecycle-attacks-sqlite.test.ts).
import { intentLifecycleAttacks } from './support/intent-lifecycle-attacks.js';

intentLifecycleAttacks('memory');
