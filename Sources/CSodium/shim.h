// libsodium from Debian's libsodium-dev: NaCl secretbox (XSalsa20-Poly1305) for rclone crypt's
// file contents, and the system's random bytes for its nonces.
#ifndef BACKUP_CSODIUM_SHIM_H
#define BACKUP_CSODIUM_SHIM_H
#include <sodium.h>
#endif
