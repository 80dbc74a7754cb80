// liblbfgs (Debian liblbfgs-dev): Naoaki Okazaki's C port of Nocedal's L-BFGS,
// built with LBFGS_FLOAT = 64 (lbfgsfloatval_t is double).
#include <lbfgs.h>
