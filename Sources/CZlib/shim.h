// zlib from Debian's zlib1g-dev. deflateInit/inflateInit are macros that pass the
// library version and struct size; Swift imports neither, so they are wrapped here.
#ifndef BACKUP_CZLIB_SHIM_H
#define BACKUP_CZLIB_SHIM_H
#include <zlib.h>

static inline int backup_deflate_init(z_streamp strm, int level) { return deflateInit(strm, level); }
static inline int backup_inflate_init(z_streamp strm) { return inflateInit(strm); }
#endif
