/**
 * `@svc/addons/build`: the tools that MAKE addon archives, for a build or a publisher: pack a
 * package, write its manifest, build the bundled store and provider archives, and sign a
 * provider package with a publisher key. The service never loads this face; what it runs at
 * start (install, verify, load) is `@svc/addons`.
 */
export * from './build-provider-addons.js';
export * from './build-store-addons.js';
export * from './pack-addon.js';
export { publisherKeyFromPem, serializePackageSignature, signatureStatement, signPackage } from './package-signature.js';
export * from './write-addon-manifest.js';
