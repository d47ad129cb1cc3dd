/**
 * `@svc/addons`: what the service does with an addon archive at run time: install it against
 * its pin, verify it (digest, files, manifest, operation set, native module, ABI, a provider's
 * signature) before any of its code runs, and load a verified store. Building and signing
 * archives is `@svc/addons/build`.
 */
export * from './archive.js';
export * from './errors.js';
export * from './failure-codes.js';
export * from './install-addon.js';
export * from './load-app-addon.js';
export * from './load-store-addon.js';
export * from './manifest.js';
export {
  checkPackageSignature,
  PACKAGE_SIGNATURE_DOMAIN,
  type PackageSignature,
  type PackageSigner,
  parsePackageSignature,
  type SignatureRefusal,
  signatureFileOf,
} from './package-signature.js';
export * from './paths.js';
export * from './set-package-pin.js';
export * from './verify-addon.js';
export * from './verify-provider.js';
