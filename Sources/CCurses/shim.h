// Wide-character ncurses from Debian's libncurses-dev. SwiftPM drops the -D flags that
// pkg-config gives, so the wide-character API is switched on here, before the include.
// Swift 6 rejects C globals (stdscr, COLS, LINES, ...) as shared mutable state and does
// not import function-like macros (COLOR_PAIR, A_BOLD, ACS_*): both are reached through
// the inline accessors below.
#ifndef BACKUP_CCURSES_SHIM_H
#define BACKUP_CCURSES_SHIM_H
#ifndef _XOPEN_SOURCE_EXTENDED
#define _XOPEN_SOURCE_EXTENDED 1
#endif
#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include <locale.h>
#include <wchar.h>
#include <ncursesw/curses.h>

static inline WINDOW *backup_stdscr(void) { return stdscr; }
static inline int backup_cols(void) { return COLS; }
static inline int backup_lines(void) { return LINES; }
static inline int backup_colors(void) { return COLORS; }
static inline int backup_color_pairs(void) { return COLOR_PAIRS; }
static inline int backup_color_pair(int n) { return (int)COLOR_PAIR(n); }
static inline int backup_a_bold(void) { return (int)A_BOLD; }
static inline int backup_a_reverse(void) { return (int)A_REVERSE; }
static inline int backup_a_dim(void) { return (int)A_DIM; }
static inline int backup_a_underline(void) { return (int)A_UNDERLINE; }
static inline int backup_a_normal(void) { return (int)A_NORMAL; }
static inline chtype backup_acs_hline(void) { return ACS_HLINE; }
static inline chtype backup_acs_vline(void) { return ACS_VLINE; }
static inline chtype backup_acs_ulcorner(void) { return ACS_ULCORNER; }
static inline chtype backup_acs_urcorner(void) { return ACS_URCORNER; }
static inline chtype backup_acs_llcorner(void) { return ACS_LLCORNER; }
static inline chtype backup_acs_lrcorner(void) { return ACS_LRCORNER; }
#endif
