// libssh2 from Debian's libssh2-1-dev (1.10): the SSH transport, host keys, authentication and
// channels under the SFTP provider. The SFTP protocol itself is spoken by BackupStorage over a
// channel (libssh2 1.10's own SFTP layer lacks posix-rename@openssh.com and hardlink@openssh.com).
#ifndef BACKUP_CSSH2_SHIM_H
#define BACKUP_CSSH2_SHIM_H
#include <stdlib.h>
#include <libssh2.h>
#include <openssl/crypto.h>

// Sets up OpenSSL (libssh2's crypto) without its exit-time cleanup, then libssh2. OpenSSL
// otherwise frees its tables in an atexit handler while another thread may still be closing
// a connection (sending its last encrypted packet), which crashed a process at exit.
static inline int backup_ssh2_init(void) {
    if (!OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL)) return -1;
    return libssh2_init(0);
}

// libssh2's interactive-authentication callback, as a plain function: it answers every prompt
// with the password that `backup_ssh2_kbd_password` was given for the session (its abstract).
static inline void backup_ssh2_kbd_answer(const char *name, int name_len, const char *instruction, int instruction_len,
                                          int num_prompts, const LIBSSH2_USERAUTH_KBDINT_PROMPT *prompts,
                                          LIBSSH2_USERAUTH_KBDINT_RESPONSE *responses, void **abstract) {
    (void)name; (void)name_len; (void)instruction; (void)instruction_len; (void)prompts;
    const char *password = abstract ? (const char *)*abstract : 0;
    for (int i = 0; i < num_prompts; i++) {
        if (!password) { responses[i].text = 0; responses[i].length = 0; continue; }
        size_t length = 0;
        while (password[length]) length++;
        // libssh2 frees each answer with its own free (the default allocator: free()).
        char *copy = (char *)malloc(length + 1);
        if (!copy) { responses[i].text = 0; responses[i].length = 0; continue; }
        for (size_t j = 0; j <= length; j++) copy[j] = password[j];
        responses[i].text = copy;
        responses[i].length = (unsigned int)length;
    }
}

// Keyboard-interactive authentication answering with `password`, held as the session's abstract
// for the length of the call only.
static inline int backup_ssh2_kbd_password(LIBSSH2_SESSION *session, const char *user, unsigned int user_len,
                                           const char *password) {
    void **abstract = libssh2_session_abstract(session);
    void *saved = *abstract;
    *abstract = (void *)password;
    int rc = libssh2_userauth_keyboard_interactive_ex(session, user, user_len, backup_ssh2_kbd_answer);
    *abstract = saved;
    return rc;
}
#endif
