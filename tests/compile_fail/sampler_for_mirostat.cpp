// expect: mirostat's mu is request state
#include <nucleus/nucleus.hpp>
#include <nucleus/sharded/chain.hpp>
int main() {
  float mu = nucleus::mirostat_initial_mu(5.0f);
  (void)nucleus::sampler_for(nucleus::top_k(40) | nucleus::mirostat_v2(5.0f, 0.1f, mu), 7);
}
