import type { ServerFailureCode } from '../failure-codes.js';

/** A listen address refused before anything binds. The message is one line: the address, why, and what to do. */
export class ListenAddressError extends Error {
  readonly code = 'listen_address_refused' as const satisfies ServerFailureCode;
  constructor(message: string) {
    super(message);
    this.name = 'ListenAddressError';
  }
}
