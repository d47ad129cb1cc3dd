// Worker threads do not inherit the parent's `--import tsx` loader on Node 20, so each worker
// registers it itself before importing its TypeScript entry point.
import { workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
await import(workerData.entry);
