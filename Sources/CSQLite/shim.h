// SQLite from Debian's libsqlite3-dev. SQLITE_TRANSIENT is a macro casting -1 to a
// function pointer, which Swift cannot import; it is wrapped here.
#ifndef BACKUP_CSQLITE_SHIM_H
#define BACKUP_CSQLITE_SHIM_H
#include <sqlite3.h>

static inline sqlite3_destructor_type backup_sqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif
