{
  "schema": 1,
  "package": "@svc/provider-webauthn",
  "version": "0.1.0",
  "sha256": "e08d0bd8b49c559177f09c932e634cf909d98ebf5136b7398d2603bc13e3f785",
  "publisher_key": "8e28bf57c7cde45f53411513dbe1baeee7a8034c39930273726146176c7ac718",
  "signature": "28f568e4b95a20a95160335b784bedb606fd5c4ab1ecea7f7804a65a9f8ad5ad08261e9fd7ba53661dce60078890120a4e47ff554e9b1514f70d518e206f0b08"
}
