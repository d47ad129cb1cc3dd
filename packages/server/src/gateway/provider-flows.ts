// TEMPORARY until prov-links is merged: the signatures of core's provider use cases as agreed.
import type { AuthDeps, Principal, ProviderHandle, ProviderReply, ProviderRequest, SessionClientInput, TokenPairJson } from '@svc/core';

export async function startProviderFlow(
  _deps: AuthDeps,
  _input: {
    readonly provider: ProviderHandle;
    readonly realm: 'application' | 'management';
    readonly intent: 'signin' | 'link' | 'signup';
    readonly principal: Principal | null;
    readonly pairing?: { readonly intentId: string; readonly code: string };
    readonly origin: string;
  },
): Promise<{ readonly flowId: string; readonly reply: ProviderReply; readonly expiresAt: number | string }> {
  throw new Error('startProviderFlow: not merged yet');
}

export async function finishProviderFlow(
  _deps: AuthDeps,
  _input: {
    readonly provider: ProviderHandle;
    readonly flowId: string;
    readonly request: ProviderRequest;
    readonly origin: string;
    readonly principal: Principal | null;
    readonly client?: SessionClientInput;
  },
): Promise<{ readonly outcome: 'session'; readonly pair: TokenPairJson } | { readonly outcome: 'linked'; readonly link: unknown }> {
  throw new Error('finishProviderFlow: not merged yet');
}
