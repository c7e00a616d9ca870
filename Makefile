# Builds backup and installs it where the system looks: the binary (a release build), the
# man page, the bash, zsh and fish completions, and the systemd user units `backup schedule`
# uses (backup@.service, backup@.timer, made by the installed binary so that they run it).
# PREFIX and DESTDIR are honoured:
#
#     make && sudo make install              # /usr/local
#     make install PREFIX=$HOME/.local       # one user, no root
#     make install DESTDIR=/tmp/pkg PREFIX=/usr
#
# The binary links the Swift standard library and Foundation statically (its own build folder,
# .build/install), so it runs without a Swift toolchain: it needs only the Debian C libraries
# `ldd` names (libcurl, libsqlite3, libncursesw, libssh2, libsodium, libxml2, zlib).
#
# The man page and the completions are generated from the command tree and committed;
# `make generate` rewrites them from the built binary, and GeneratedFilesTests fails when
# they differ from what the binary prints.

PREFIX ?= /usr/local
DESTDIR ?=
SWIFT ?= swift
INSTALL ?= install
# The self-contained release build.
RELEASE = $(SWIFT) build -c release --static-swift-stdlib --product backup --scratch-path .build/install

bindir = $(PREFIX)/bin
man1dir = $(PREFIX)/share/man/man1
bashdir = $(PREFIX)/share/bash-completion/completions
zshdir = $(PREFIX)/share/zsh/site-functions
fishdir = $(PREFIX)/share/fish/vendor_completions.d
userunitdir = $(PREFIX)/lib/systemd/user

.PHONY: all build install install-bin install-data uninstall generate deb

all: build

build:
	$(RELEASE)

install: install-bin install-data

# Builds first when this checkout belongs to the current user. Under `sudo make install` it
# does not: it installs what `make` built, rather than leaving root-owned files in .build
# (and sudo's PATH often has no swift).
install-bin:
	@if [ "$$(stat -c %u .)" = "$$(id -u)" ]; then $(RELEASE); fi
	@bin="$$($(RELEASE) --show-bin-path)/backup"; \
	if [ ! -x "$$bin" ]; then echo "no release build at $$bin: run make first" >&2; exit 1; fi; \
	$(INSTALL) -d "$(DESTDIR)$(bindir)" && \
	$(INSTALL) -m 755 "$$bin" "$(DESTDIR)$(bindir)/backup"
	$(INSTALL) -d "$(DESTDIR)$(userunitdir)"
	"$(DESTDIR)$(bindir)/backup" generate-unit service --exec "$(bindir)/backup" >"$(DESTDIR)$(userunitdir)/backup@.service"
	"$(DESTDIR)$(bindir)/backup" generate-unit timer >"$(DESTDIR)$(userunitdir)/backup@.timer"
	chmod 644 "$(DESTDIR)$(userunitdir)/backup@.service" "$(DESTDIR)$(userunitdir)/backup@.timer"

install-data:
	$(INSTALL) -d "$(DESTDIR)$(man1dir)" "$(DESTDIR)$(bashdir)" "$(DESTDIR)$(zshdir)" "$(DESTDIR)$(fishdir)"
	$(INSTALL) -m 644 man/backup.1 "$(DESTDIR)$(man1dir)/backup.1"
	$(INSTALL) -m 644 completions/backup.bash "$(DESTDIR)$(bashdir)/backup"
	$(INSTALL) -m 644 completions/_backup "$(DESTDIR)$(zshdir)/_backup"
	$(INSTALL) -m 644 completions/backup.fish "$(DESTDIR)$(fishdir)/backup.fish"

uninstall:
	rm -f "$(DESTDIR)$(bindir)/backup" "$(DESTDIR)$(man1dir)/backup.1" \
		"$(DESTDIR)$(bashdir)/backup" "$(DESTDIR)$(zshdir)/_backup" "$(DESTDIR)$(fishdir)/backup.fish" \
		"$(DESTDIR)$(userunitdir)/backup@.service" "$(DESTDIR)$(userunitdir)/backup@.timer"

generate:
	$(SWIFT) build
	@bin="$$($(SWIFT) build --show-bin-path)/backup"; \
	"$$bin" generate-manual >man/backup.1 && \
	"$$bin" generate-completions bash >completions/backup.bash && \
	"$$bin" generate-completions zsh >completions/_backup && \
	"$$bin" generate-completions fish >completions/backup.fish

# A Debian package of what `make install` installs (PREFIX=/usr), in dist/.
deb:
	scripts/make-deb
