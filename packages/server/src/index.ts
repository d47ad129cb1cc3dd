export * from './http/index.js';
export * from './management/index.js';
export * from './metrics/index.js';
export * from './node/index.js';
export * from './openapi/index.js';
