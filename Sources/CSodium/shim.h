#ifndef KEEPTRACK_CSODIUM_SHIM_H
#define KEEPTRACK_CSODIUM_SHIM_H
#include <sodium.h>

/// The sizes of crypto_secretbox (XSalsa20-Poly1305) as values (macros Swift may not import).
static inline unsigned long keeptrack_secretbox_keybytes(void) { return crypto_secretbox_KEYBYTES; }
static inline unsigned long keeptrack_secretbox_noncebytes(void) { return crypto_secretbox_NONCEBYTES; }
static inline unsigned long keeptrack_secretbox_macbytes(void) { return crypto_secretbox_MACBYTES; }
#endif
