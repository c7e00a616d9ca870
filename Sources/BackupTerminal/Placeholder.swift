import CCurses
