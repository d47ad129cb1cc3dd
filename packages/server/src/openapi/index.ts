export { buildOpenApiDocument, type OpenApiDocument, openApiJson, renderOpenApiDocument } from './document.js';
export { OPENAPI_PATH, type OpenApiRouteOptions, openApiRoute } from './route.js';
