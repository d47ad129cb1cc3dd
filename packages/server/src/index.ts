export * from './http/index.js';
export * from './management/index.js';
