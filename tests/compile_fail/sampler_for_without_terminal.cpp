// expect: sampler_for: the chain must end in categorical\(\) or argmax\(\)
#include <nucleus/nucleus.hpp>
#include <nucleus/sharded/chain.hpp>
int main() {
  (void)nucleus::sampler_for(nucleus::top_k(40) | nucleus::top_p(0.9f), 7);  // no terminal: nothing to draw
}
