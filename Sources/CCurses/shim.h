// Wide-character ncurses from Debian's libncurses-dev. SwiftPM drops the -D flags that
// pkg-config gives, so the wide-character API is switched on here, before the include.
// Swift 6 rejects C globals (stdscr, COLS, LINES, ...) as shared mutable state and does
// not import function-like macros (COLOR_PAIR, A_BOLD, ACS_*): both are reached through
// the inline accessors below. The terminal guard at the end restores the terminal when the
// process leaves without endwin(): exit() (atexit) and a crash (fatal signals), in C because
// a signal handler may only do async-signal-safe work.
#ifndef BACKUP_CCURSES_SHIM_H
#define BACKUP_CCURSES_SHIM_H
#ifndef _XOPEN_SOURCE_EXTENDED
#define _XOPEN_SOURCE_EXTENDED 1
#endif
#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif
#include <locale.h>
#include <langinfo.h>
#include <wchar.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <ncursesw/curses.h>
#include <ncursesw/term.h>

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

/// Starts curses on stdout/stdin like initscr(), but returns 0 instead of exiting when the
/// terminal type is unknown.
static inline int backup_start(void) {
    SCREEN *screen = newterm(NULL, stdout, stdin);
    if (screen == NULL) return 0;
    set_term(screen);
    return 1;
}
/// Sets the attributes (and colour pair, folded in) of text drawn next on stdscr.
static inline int backup_attrset(int attributes) { return wattrset(stdscr, attributes); }
/// Writes `count` wide characters at row `y`, column `x` of stdscr.
static inline int backup_mvaddnwstr(int y, int x, const wchar_t *text, int count) {
    return mvwaddnwstr(stdscr, y, x, text, count);
}
/// Reads one key: OK with a character, KEY_CODE_YES with a key code, ERR on timeout.
static inline int backup_get_wch(wint_t *key) { return wget_wch(stdscr, key); }
static inline int backup_key_f(int n) { return KEY_F(n); }
/// Whether the locale's character set is UTF-8 (wide characters draw correctly).
static inline int backup_locale_is_utf8(void) {
    const char *codeset = nl_langinfo(CODESET);
    return codeset != NULL && (strcmp(codeset, "UTF-8") == 0 || strcmp(codeset, "utf8") == 0);
}

// MARK: terminal guard

// The guard's state lives in a function-local static: Swift emits the inline functions it
// calls, but not file-scope statics of a header, which would be left undefined at link time.
struct backup_guard_state {
    struct termios termios;
    int has_termios;
    volatile sig_atomic_t active;
    char reset[256];
    size_t reset_length;
    struct sigaction previous[32];
    int installed;
};

static inline struct backup_guard_state *backup_guard(void) {
    static struct backup_guard_state state;
    return &state;
}

static inline void backup_guard_append(const char *capability) {
    struct backup_guard_state *g = backup_guard();
    const char *value = tigetstr(capability);
    if (value == NULL || value == (char *)-1) return;
    size_t length = strlen(value);
    if (g->reset_length + length >= sizeof g->reset) return;
    memcpy(g->reset + g->reset_length, value, length);
    g->reset_length += length;
}

/// Puts the terminal back as it was before curses, using only async-signal-safe calls.
static inline void backup_guard_restore_now(void) {
    struct backup_guard_state *g = backup_guard();
    if (!g->active) return;
    g->active = 0;
    if (g->reset_length > 0) {
        ssize_t ignored = write(STDOUT_FILENO, g->reset, g->reset_length);
        (void)ignored;
    }
    if (g->has_termios) tcsetattr(STDIN_FILENO, TCSANOW, &g->termios);
}

static inline void backup_guard_on_signal(int number) {
    backup_guard_restore_now();
    // Hand the signal on to whoever had it before (the default action or the Swift
    // runtime's backtracer): reinstall it, and re-raise; the re-raised signal is delivered
    // when this handler returns.
    if (number > 0 && number < 32) sigaction(number, &backup_guard()->previous[number], NULL);
    raise(number);
}

static inline void backup_guard_at_exit(void) {
    struct backup_guard_state *g = backup_guard();
    if (g->active) {
        endwin();
        g->active = 0;
    }
}

/// Call before starting curses: remembers the terminal's modes.
static inline void backup_guard_save_modes(void) {
    struct backup_guard_state *g = backup_guard();
    g->has_termios = tcgetattr(STDIN_FILENO, &g->termios) == 0;
}

/// Call after starting curses: records the reset sequences and installs the exit and crash hooks.
static inline void backup_guard_arm(void) {
    struct backup_guard_state *g = backup_guard();
    g->reset_length = 0;
    backup_guard_append("sgr0");
    backup_guard_append("cnorm");
    backup_guard_append("rmkx");
    backup_guard_append("rmcup");
    g->active = 1;
    if (g->installed) return;
    g->installed = 1;
    atexit(backup_guard_at_exit);
    const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_handler = backup_guard_on_signal;
        sigemptyset(&action.sa_mask);
        sigaction(fatal[i], &action, &g->previous[fatal[i]]);
    }
}

/// Call after endwin(): the guard has nothing left to restore.
static inline void backup_guard_disarm(void) { backup_guard()->active = 0; }
#endif
