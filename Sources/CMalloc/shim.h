// glibc's allocator controls (mallopt, malloc_trim), which the Glibc module does not export.
#include <malloc.h>
