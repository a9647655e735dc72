// The main of a scenario program (emu_pipes.cpp, emu_cube.cpp, emu_faults.cpp): argv[1] names the scenario the including file's
// Run() plays as one block; a fault prints "FAULT <what>", a clean run "OK <SoC>".
#pragma once
#include <iostream>
#include <string>

#include "kernel_operator.h"

static void Run(const std::string& scenario);

int main(int argc, char** argv) {
    if (argc < 2) return 2;
    try {
        Run(argv[1]);
        asc_emu::EndBlock();
    } catch (const asc_emu::Fault& e) {
        std::cout << "FAULT " << e.what() << std::endl;
        return 0;
    }
    std::cout << "OK " << asc_emu::St().soc.name << std::endl;
    return 0;
}
