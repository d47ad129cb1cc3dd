import { SCIM_BASE_PATH, SCIM_SCHEMA } from '@svc/core';
import { type DocumentedSchema, documented, problemResponses } from '../http/problem-schema.js';

/** The OpenAPI security requirement of the SCIM routes: a SCIM token (`svcs_...`). */
export const SCIM_BEARER = [{ scimBearer: [] }];

/** The SCIM catch-alls (`404` SCIM errors for any other path of the service): not operations, not in the document. */
export const SCIM_CATCH_ALLS: readonly string[] = [SCIM_BASE_PATH, `${SCIM_BASE_PATH}/`, `${SCIM_BASE_PATH}/*`];

const scimError = {
  type: 'object',
  required: ['schemas', 'status', 'detail'],
  properties: {
    schemas: { type: 'array', items: { const: SCIM_SCHEMA.error } },
    status: { type: 'string', description: 'the HTTP status, as a string (RFC 7644 §3.12)' },
    scimType: {
      type: 'string',
      description: 'invalidFilter, invalidSyntax, invalidPath, invalidValue, uniqueness, mutability, noTarget, tooMany',
    },
    detail: { type: 'string' },
  },
} as const;

const scimBody = (description: string) => ({
  description,
  content: { 'application/scim+json': { schema: { type: 'object', description: 'see RFC 7643 and GET /.svc/scim/v2/Schemas' } } },
});

/**
 * The refusals of a SCIM route: RFC 7644 §3.12 errors (`application/scim+json`); a request the
 * gateway refuses before it reaches the service (header hygiene, the DNS-rebinding guard,
 * connection caps) gets the gateway's problem+json, so both are described.
 */
const errors = (...statuses: number[]) => {
  const out: Record<string, unknown> = {};
  for (const [status, problem] of Object.entries(problemResponses(401, 403, 429, ...statuses))) {
    out[status] = {
      description: `A SCIM error (RFC 7644 §3.12); before the SCIM service, the gateway's problem+json. ${problem.description}`,
      content: { ...problem.content, 'application/scim+json': { schema: scimError } },
    };
  }
  return out;
};

const idParams = { type: 'object', required: ['id'], properties: { id: { type: 'string' } } } as const;
const listQuery = {
  type: 'object',
  properties: {
    filter: { type: 'string', description: '`<attribute> eq "<value>"` only' },
    startIndex: { type: 'string', description: '1-based' },
    count: { type: 'string', description: 'at most 1000' },
    excludedAttributes: { type: 'string', description: '`members` (Groups)' },
  },
} as const;

function doc(
  summary: string,
  status: number,
  description: string,
  problems: number[],
  extra: Partial<DocumentedSchema> = {},
): DocumentedSchema {
  return documented({
    summary,
    security: SCIM_BEARER,
    ...extra,
    response: {
      [status]: status === 204 ? { type: 'null', description } : scimBody(description),
      ...errors(...problems),
    },
  });
}

const base = SCIM_BASE_PATH;

/**
 * The SCIM 2.0 service's routes (docs/scim.md) as the OpenAPI document describes them: bodies
 * are `application/scim+json` resources (RFC 7643), described by the service's own `/Schemas`.
 */
export const SCIM_ROUTE_DOCS: Readonly<Record<string, DocumentedSchema>> = {
  [`GET ${base}/ServiceProviderConfig`]: doc('SCIM: what the service supports (RFC 7644 §4)', 200, 'The ServiceProviderConfig', []),
  [`GET ${base}/ResourceTypes`]: doc('SCIM: the resource types (User, Group)', 200, 'A ListResponse of ResourceTypes', []),
  [`GET ${base}/ResourceTypes/:id`]: doc('SCIM: one resource type', 200, 'A ResourceType', [404], { params: idParams }),
  [`GET ${base}/Schemas`]: doc('SCIM: the User and Group schemas', 200, 'A ListResponse of Schemas', []),
  [`GET ${base}/Schemas/:id`]: doc('SCIM: one schema', 200, 'A Schema', [404], { params: idParams }),
  [`GET ${base}/Users`]: doc('SCIM: list the application users (filter userName or externalId eq)', 200, 'A ListResponse of Users', [400], {
    querystring: listQuery,
  }),
  [`POST ${base}/Users`]: doc('SCIM: provision an application user', 201, 'The User (Location: its URL)', [400, 409, 413, 415]),
  [`GET ${base}/Users/:id`]: doc('SCIM: one application user (id: its subject)', 200, 'The User', [404], { params: idParams }),
  [`PUT ${base}/Users/:id`]: doc('SCIM: replace a user', 200, 'The User', [400, 404, 409, 413, 415], { params: idParams }),
  [`PATCH ${base}/Users/:id`]: doc(
    'SCIM: change a user (active false disables it and ends its sessions)',
    200,
    'The User',
    [400, 404, 409, 413, 415],
    {
      params: idParams,
    },
  ),
  [`DELETE ${base}/Users/:id`]: doc('SCIM: remove a user (its devices, links and sessions)', 204, 'Removed', [404], { params: idParams }),
  [`GET ${base}/Groups`]: doc('SCIM: list the groups (filter displayName or externalId eq)', 200, 'A ListResponse of Groups', [400], {
    querystring: listQuery,
  }),
  [`POST ${base}/Groups`]: doc(
    'SCIM: create a group (displayName a valid group name)',
    201,
    'The Group (Location: its URL)',
    [400, 409, 413, 415],
  ),
  [`GET ${base}/Groups/:id`]: doc('SCIM: one group', 200, 'The Group', [404], { params: idParams, querystring: listQuery }),
  [`PUT ${base}/Groups/:id`]: doc('SCIM: replace a group', 200, 'The Group', [400, 404, 409, 413, 415], { params: idParams }),
  [`PATCH ${base}/Groups/:id`]: doc(
    'SCIM: change a group (members add/remove/replace, rename)',
    200,
    'The Group',
    [400, 404, 409, 413, 415],
    {
      params: idParams,
    },
  ),
  [`DELETE ${base}/Groups/:id`]: doc('SCIM: delete a group (its name leaves every member)', 204, 'Deleted', [404], { params: idParams }),
};
