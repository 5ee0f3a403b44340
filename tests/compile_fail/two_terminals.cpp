// expect: must be the last stage of a chain
#include <nucleus/nucleus.hpp>
nucleus::chain<nucleus::argmax_stage, nucleus::categorical_stage> bad{nucleus::argmax(),
                                                                      nucleus::categorical()};
