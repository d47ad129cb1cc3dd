#!/usr/bin/env node
import { main } from './main.js';

// Exit explicitly: a foreground server resolves only after a graceful shutdown, and a stray
// handle must not keep a finished command alive. Output is written synchronously, so nothing
// is lost.
process.exit(await main(process.argv.slice(2)));
